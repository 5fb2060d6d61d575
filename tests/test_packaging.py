"""The checkout installs editable like a package (pyproject.toml), into a throwaway venv: the tools run with
no PYTHONPATH and `qa` imports from training_code/, as the containers see it. The throwaway venv reads the
pinned dependencies from the test run's own site-packages (a .pth file) and installs only the project."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_editable_install_runs_the_tools_without_pythonpath(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    ).stdout.strip()
    (Path(site) / "shared-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-e", ROOT],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)

    help_text = run(str(python), "-m", "tools.upload_dataset", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--replace" in help_text.stdout
    # The local runner imports the Lambda functions' store contract and the tools the paths of config/paths.py:
    # nothing may depend on a PYTHONPATH or a sys.path change made by another import.
    for module in ("local_runner", "tools.summarize", "tools.report"):
        module_help = run(str(python), "-m", module, "--help")
        assert module_help.returncode == 0 and "usage:" in module_help.stdout, (module, module_help.stderr)
    where = run(str(python), "-c", "import qa.outputs, tools.deployment; print(qa.outputs.__file__)")
    assert where.stdout.strip() == str(ROOT / "training_code" / "qa" / "outputs.py"), where.stderr
    script = run(str(venv / "bin" / "hfqa-executions"), "--help")
    assert script.returncode == 0 and "start" in script.stdout, script.stderr
