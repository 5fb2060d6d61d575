"""`python app.py` needs no network and no credentials (and CDK's built-in validator passes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import STACK_PURPOSES
from tests.conftest import ROOT, run_without_network, unshare_works


def node_bin_dir() -> Path:
    node = shutil.which("node")
    assert node is not None, "node is not on PATH (the CDK runs on it)"
    return Path(node).parent


@pytest.mark.skipif(not unshare_works(), reason="unshare -n needs root or user namespaces (CI runs as root)")
def test_synth_in_an_empty_environment_without_network(tmp_path):
    node_dir = node_bin_dir()
    env = {"PATH": f"{Path(sys.executable).parent}:{node_dir}:/usr/bin:/bin", "CDK_OUTDIR": str(tmp_path)}
    # No CDK_VALIDATION here: this is the one synth that runs CDK's built-in template validation.
    result = run_without_network([sys.executable, "app.py"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stacks = [name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"]
    assert sorted(stacks) == ["hfqa-dev-data", "hfqa-dev-network", "hfqa-dev-pipeline"]
    assert "end-of-life" not in result.stderr  # the Node 20 banner is silenced


def test_invalid_settings_stop_synth_with_the_message(tmp_path):
    env = {"PATH": f"{Path(sys.executable).parent}:{node_bin_dir()}:/usr/bin:/bin"}
    context = json.dumps({"training.max_wait_seconds": "10", "training.max_run_seconds": "20"})
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env={**env, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": context, "CDK_VALIDATION": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "training.max_wait_seconds (10) must be >= training.max_run_seconds (20)" in result.stderr


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"ENV": "prod"},
            "error: -c ENV=prod: unknown context key, so nothing would select that environment; use -c env=prod",
        ),
        ({"name_prefx": "x"}, "error: -c name_prefx=...: unknown context key; did you mean name_prefix?"),
    ],
)
def test_a_misspelt_context_key_stops_synth_with_the_fix(tmp_path, context, message):
    env = {"PATH": f"{Path(sys.executable).parent}:{node_bin_dir()}:/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env={**env, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(context), "CDK_VALIDATION": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "manifest.json").exists()  # nothing was synthesized, dev included


def test_the_apps_stacks_are_named_by_the_settings(dev, prod):
    for env in (dev, prod):
        names = [stack.stack_name for stack in env.stacks.all()]
        assert names == [env.settings.stack_name(purpose) for purpose in STACK_PURPOSES]
