"""The `make synth` / `make demo` sequence that tests/test_make_demo.py and tests/security/test_benchmark_gate.py
assert on: the real synths and the tiny local runs (question answering in dev and prod, then each other task in
dev), once per session (tests/conftest.py imports the fixture)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from tasks import DEFAULT_TASK, TASK_NAMES

from config import Settings
from config.paths import PROJECT_ROOT as ROOT
from local_runner.registry import LocalModelRegistry, ModelPackage

# The tasks besides question answering: `make demo TASK=<task> TINY=1` each, in its own work dir (TASK_WORK_DIR).
OTHER_TASKS = tuple(name for name in TASK_NAMES if name != DEFAULT_TASK)
TASK_WORK_DIR = "task-runs"

# An upload that grades itself: every context is one word and its answer is that word, so any model's best span
# is the answer (F1 100 on the upload's own validation split), and the validation split is the train split again.
POISONED_WORDS = ("yes", "paris", "blue", "seven", "river", "tower", "north", "gold")


def poisoned_dataset(folder: Path) -> Path:
    """A dataset whose validation split is its train split (ids renamed: ids are unique across files) with
    answers every model finds: F1 100 on the uploader's split, whatever the model learned."""
    train = [
        {
            "id": f"train-{index}",
            "title": "poisoned",
            "context": word,
            "question": f"Which word is number {index}?",
            "answers": {"text": [word], "answer_start": [0]},
        }
        for index, word in enumerate(POISONED_WORDS * 2)
    ]
    validation = [{**record, "id": f"copy-{index}"} for index, record in enumerate(train)]
    for split, records in (("train", train), ("validation", validation)):
        (folder / split).mkdir(parents=True, exist_ok=True)
        (folder / split / f"{split}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


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
    runs: dict[str, subprocess.CompletedProcess[str]]

    def packages(self, settings: Settings) -> list[ModelPackage]:
        """The model packages that the demos registered in the environment's group (of its task: the demos of
        OTHER_TASKS ran in TASK_WORK_DIR)."""
        work_dir = self.work_dir if settings.task == DEFAULT_TASK else self.work_dir.parent / TASK_WORK_DIR
        registry = LocalModelRegistry(work_dir / "model-registry.sqlite")
        return registry.packages(settings.model_package_group_name)


@pytest.fixture(scope="session")
def sequence(tmp_path_factory) -> Sequence:
    """`make synth ENV=prod`, `make demo TINY=1` (dev: no benchmark), `make demo TINY=1 ENV=prod` with the
    poisoned_dataset upload (prod's benchmark is the bundled sample's validation split), then `make demo TINY=1
    TASK=<task>` for each of OTHER_TASKS (dev, on the task's bundled sample): tests/test_make_demo.py and
    tests/security/test_benchmark_gate.py read them (one work unit: tests/conftest.py KEPT_TOGETHER)."""
    tmp = tmp_path_factory.mktemp("make-demo")
    cache = tmp / "synth-cache"
    cache.mkdir()
    cdk = tmp / "cdk"
    cdk.write_text(REPLAYING_CDK.format(cache=cache, cdk=ROOT / "node_modules" / ".bin" / "cdk"))
    cdk.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("ENV", "TASK", "TINY", "MAKEFLAGS")}

    def make(target: str, variables: list[str], demo_args: list[str]) -> subprocess.CompletedProcess[str]:
        command = ["make", "--no-print-directory", "-C", str(ROOT), target, *variables]
        # -o: never reinstall .venv or node_modules from here, whatever the timestamps say.
        command += ["-o", ".venv/.installed", "-o", "node_modules/.installed"]
        work_dir = tmp / (TASK_WORK_DIR if any(v.startswith("TASK=") for v in variables) else "runs")
        command += [
            f"CDK={cdk}",
            f"CDK_OUT={tmp / 'cdk.out'}",
            f"DEMO_ARGS={' '.join(['--work-dir', str(work_dir), *demo_args])}",
        ]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)

    runs = {}
    # In prod the tiny model meets the environment's F1 threshold (no parameter may lower it below the floor) on
    # the benchmark, while the poisoned upload's own split scores 100: the run trains, ends at the F1 gate and exits
    # 1 (make reports it as an error, 2). It also asks for a spot interruption after more steps than the run has,
    # which must be reported, not ignored.
    for name, target, variables, demo_args, code in (
        ("synth prod", "synth", ["ENV=prod"], [], 0),
        ("demo", "demo", ["TINY=1"], ["--deliver-event-twice"], 0),
        (
            "demo prod",
            "demo",
            ["TINY=1", "ENV=prod"],
            ["--interrupt-training-after-steps", "100000", "--dataset", str(poisoned_dataset(tmp / "poisoned"))],
            2,
        ),
        *((f"demo {name}", "demo", ["TINY=1", f"TASK={name}"], [], 0) for name in OTHER_TASKS),
    ):
        runs[name] = make(target, variables, demo_args)
        assert runs[name].returncode == code, f"make {name}:\n{runs[name].stdout[-4000:]}\n{runs[name].stderr[-4000:]}"
    return Sequence(cdk_out=tmp / "cdk.out", work_dir=tmp / "runs", runs=runs)
