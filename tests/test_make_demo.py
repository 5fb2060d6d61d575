"""`make synth` and `make demo` keep each environment in its own assembly, so any order of them works.

One checkout, the Makefile's own commands: `make synth ENV=prod`, then `make demo TINY=1` (dev), then
`make demo TINY=1 ENV=prod`. To keep this to two real synths and two tiny runs on CI's two cores, the CDK
CLI is wrapped so that a repeated synth with the same arguments replays the first one's output (synth is
deterministic); only CDK_OUT (where the per-environment folders go) and the demo's work dir point into a
temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from config import load_settings
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

REPLAYING_CDK = """#!/usr/bin/env bash
set -euo pipefail
cache="{cache}/$(printf '%s ' "$@" | sha1sum | cut -c1-16)"
output="${{@: -1}}"  # the Makefile's synth ends with --output <folder>
if [ -d "$cache" ]; then mkdir -p "$output" && cp -r "$cache/." "$output/" && exit 0; fi
"{cdk}" "$@"
cp -r "$output" "$cache"
"""


@dataclass(frozen=True)
class Sequence:
    cdk_out: Path
    work_dir: Path
    runs: dict[str, subprocess.CompletedProcess]


@pytest.fixture(scope="module")
def sequence(tmp_path_factory) -> Sequence:
    tmp = tmp_path_factory.mktemp("make-demo")
    cache = tmp / "synth-cache"
    cache.mkdir()
    cdk = tmp / "cdk"
    cdk.write_text(REPLAYING_CDK.format(cache=cache, cdk=ROOT / "node_modules" / ".bin" / "cdk"))
    cdk.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("ENV", "TINY", "MAKEFLAGS")}

    def make(target: str, *variables: str) -> subprocess.CompletedProcess:
        command = ["make", "--no-print-directory", "-C", str(ROOT), target, *variables]
        # -o: never reinstall .venv or node_modules from here, whatever the timestamps say.
        command += ["-o", ".venv/.installed", "-o", "node_modules/.installed"]
        command += [f"CDK={cdk}", f"CDK_OUT={tmp / 'cdk.out'}", f"DEMO_ARGS=--work-dir {tmp / 'runs'}"]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)

    runs = {}
    for name, target, variables in (
        ("synth prod", "synth", ["ENV=prod"]),
        ("demo", "demo", ["TINY=1"]),
        ("demo prod", "demo", ["TINY=1", "ENV=prod"]),
    ):
        runs[name] = make(target, *variables)
        assert runs[name].returncode == 0, f"make {name}:\n{runs[name].stdout[-4000:]}\n{runs[name].stderr[-4000:]}"
    return Sequence(cdk_out=tmp / "cdk.out", work_dir=tmp / "runs", runs=runs)


def stacks_in(assembly: Path) -> list[str]:
    manifest = json.loads((assembly / "manifest.json").read_text())
    return sorted(name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack")


def test_synth_prod_then_demo_dev_then_demo_prod_each_runs_its_own_pipeline(sequence, cdk_context):
    for env_name, run in (("dev", sequence.runs["demo"]), ("prod", sequence.runs["demo prod"])):
        settings = load_settings({**cdk_context, "env": env_name})
        prefix = settings.name_prefix
        assert stacks_in(sequence.cdk_out / env_name) == [f"{prefix}-data", f"{prefix}-network", f"{prefix}-pipeline"]
        assert f"Synthesized {sequence.cdk_out / env_name}/" in run.stdout
        assert f" of {settings.pipeline_name}\n" in run.stdout
        assert ": Succeeded\n" in run.stdout


def test_demo_says_the_head_is_new_once_and_keeps_load_reports_in_the_job_log(sequence):
    for run in (sequence.runs["demo"], sequence.runs["demo prod"]):
        console = run.stdout + run.stderr
        assert "UNEXPECTED" not in console
        assert "MISSING" not in console
        assert console.count("the question-answering head is new") == 1
    job_logs = sorted(sequence.work_dir.glob("executions/*/FineTune/job.log"))
    assert len(job_logs) == 2
    for job_log in job_logs:
        text = job_log.read_text()
        assert "LOAD REPORT" in text and "qa_outputs.weight" in text and "MISSING" in text
