"""The pre-imported Python that the tests start their jobs with (tests/warm_python.py) runs a command as the real
interpreter does: the same arguments, import path, folder, environment, streams, exit status and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

PROBE = """
import json, os, sys, tempfile
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"),
    "tmp": tempfile.gettempdir(), "stdin": sys.stdin.read(), "qa_imported_before": "qa.outputs" in sys.modules,
    "name": __name__, "main_module": sys.modules["__main__"].__dict__ is globals(),
}))
sys.stderr.write("to stderr\\n")
raise SystemExit(int(sys.argv[-1]))
"""


def run(python: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROBE": "yes", "TMPDIR": str(cwd)}
    return subprocess.run([python, *args], cwd=cwd, env=env, input="some input", capture_output=True, text=True)


@pytest.mark.parametrize("form", ["script", "-c", "-m", "-u script"])
def test_a_command_runs_as_under_the_real_interpreter(tmp_path, warm_python, form):
    (tmp_path / "probe.py").write_text(PROBE)
    args = {
        "script": ["probe.py", "x", "3"],
        "-u script": ["-u", "probe.py", "x", "3"],
        "-c": ["-c", PROBE, "x", "3"],
        "-m": ["-m", "probe", "x", "3"],
    }[form]
    real, warm = (run(python, args, tmp_path) for python in (sys.executable, str(warm_python)))
    assert (warm.returncode, warm.stderr) == (real.returncode, real.stderr) == (3, "to stderr\n")
    assert json.loads(warm.stdout) == json.loads(real.stdout)
    assert json.loads(real.stdout)["stdin"] == "some input" and json.loads(real.stdout)["tmp"] == str(tmp_path)


def test_an_uncaught_exception_exits_1_with_its_traceback(tmp_path, warm_python):
    warm = run(str(warm_python), ["-c", "raise ValueError('bad record')"], tmp_path)
    assert warm.returncode == 1 and warm.stderr.rstrip().endswith("ValueError: bad record"), warm.stderr


def test_a_signal_reaches_the_job_and_the_client_exits_as_the_job_did(tmp_path, warm_python):
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('stopping', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\ntime.sleep(60)"
    )
    for python in (sys.executable, str(warm_python)):
        client = subprocess.Popen([python, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert client.stdout is not None and client.stdout.readline() == "ready\n"
        os.killpg(client.pid, signal.SIGTERM)  # as the local runner stops a job
        assert (client.stdout.read(), client.wait(timeout=30)) == ("stopping\n", 7), python
    killed = subprocess.Popen([str(warm_python), "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert killed.wait(timeout=30) == -signal.SIGTERM


def test_a_job_dies_with_its_client_killed_by_sigkill(tmp_path, warm_python):
    """A spot reclaim SIGKILLs the client: the job it started goes too, within moments."""
    script = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"
    client = subprocess.Popen([str(warm_python), "-c", script], stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None
    job = psutil.Process(int(client.stdout.readline()))
    client.kill()
    client.wait(timeout=30)
    deadline = time.monotonic() + 10
    while job.is_running() and job.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not job.is_running() or job.status() == psutil.STATUS_ZOMBIE


def test_other_interpreter_options_and_a_sitecustomize_run_the_real_interpreter(tmp_path, warm_python):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['CUSTOMIZED'] = '1'\n")
    code = "import os, sys; print(sys.flags.optimize, os.environ.get('CUSTOMIZED'))"
    optimized = subprocess.run([str(warm_python), "-O", "-c", code], capture_output=True, text=True)
    customized = subprocess.run(
        [str(warm_python), "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert (optimized.stdout, customized.stdout) == ("1 None\n", "0 1\n")


def test_an_uncaught_keyboard_interrupt_ends_the_job_by_sigint(tmp_path, warm_python):
    for python in (sys.executable, str(warm_python)):
        assert run(python, ["-c", "raise KeyboardInterrupt"], tmp_path).returncode == -signal.SIGINT, python
