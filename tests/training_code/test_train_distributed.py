"""Data-parallel training and spot-safe resume, run the way SageMaker runs the script.

The spot-interruption test resumes to the weights of one uninterrupted run per process count, trained once
for the module (tests/conftest.py keeps the module on one pytest-xdist worker for that)."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from qa.feature_files import read_features, write_features
from qa.outputs import LOG_HISTORY_FILE, LOG_TIME

from tests.training_code.runner import TrainRun, load_weights, run_training

pytestmark = pytest.mark.slow

BASE = {
    "epochs": 1,
    "learning_rate": 5e-4,
    "warmup_ratio": 0.2,
    "logging_steps": 1,
    "seed": 11,
    "precision": "bf16",  # resolved to full precision on CPU
    "group_by_length": "true",
    "checkpoint_minutes": 0,  # checkpoints at fixed steps only: the tests know where they are
}


# Interrupted and resumed runs: two epochs (a resume crosses the epoch boundary), a checkpoint every 5 steps,
# the stop flag looked at every 2 steps; the global batch is 16 on any process count.
CHECKPOINT_STEPS = 5
SPOT = {**BASE, "epochs": 2, "checkpoint_steps": CHECKPOINT_STEPS, "control_steps": 2}


def spot_hps(processes: int) -> dict[str, object]:
    return {**SPOT, "per_device_train_batch_size": 16 // processes}


@pytest.fixture(scope="module")
def uninterrupted(tiny_dropout_model_dir, sample_features, tmp_path_factory) -> Callable[[int], tuple[Path, TrainRun]]:
    """Process count -> (work dir, run) of the SPOT run that nothing interrupts, trained on first use."""
    runs: dict[int, tuple[Path, TrainRun]] = {}

    def get(processes: int) -> tuple[Path, TrainRun]:
        if processes not in runs:
            work = tmp_path_factory.mktemp(f"uninterrupted-{processes}")
            run = run_training(tiny_dropout_model_dir, sample_features, work, spot_hps(processes), processes)
            assert run.returncode == 0, run.output[-3000:]
            runs[processes] = (work, run)
        return runs[processes]

    return get


def assert_same_weights(a, b, atol=0.0, skip=()):
    assert a.keys() == b.keys()
    for name in sorted(set(a) - set(skip)):
        if atol:
            torch.testing.assert_close(a[name], b[name], atol=atol, rtol=0, msg=name)
        else:
            assert torch.equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def equal_length_features(sample_features, tmp_path_factory):
    """Only the features of the most common length: padding (which the QA loss sees) is then identical
    whether 8 samples are batched on one process or 4 on each of two."""
    columns = read_features(sample_features / "train")
    lengths = [len(ids) for ids in columns["input_ids"]]
    mode = Counter(lengths).most_common(1)[0][0]
    keep = [i for i, length in enumerate(lengths) if length == mode]
    assert len(keep) >= 64
    out = tmp_path_factory.mktemp("equal-length")
    write_features(out / "train", {name: [values[i] for i in keep] for name, values in columns.items()})
    return out


def test_two_processes_agree_with_each_other_and_with_one_process(tmp_path, tiny_model_dir, equal_length_features):
    hps = {**BASE, "max_steps": 8, "checkpoint_steps": 100}
    one = run_training(
        tiny_model_dir, equal_length_features, tmp_path / "one", {**hps, "per_device_train_batch_size": 8}
    )
    two = run_training(
        tiny_model_dir, equal_length_features, tmp_path / "two", {**hps, "per_device_train_batch_size": 4}, processes=2
    )
    assert one.returncode == 0, one.output[-3000:]
    assert two.returncode == 0, two.output[-3000:]
    assert "backend=gloo world_size=2" in two.output
    # No validation channel: no evaluation, and the log says so.
    assert "no validation channel at" in one.output and not one.lines("evaluation: ")
    assert two.output.count("no validation channel at") == 1  # said once, by the main process
    digests = dict(re.findall(r"rank=(\d+) parameter_sha256=([0-9a-f]{64})", two.output))
    assert set(digests) == {"0", "1"}
    assert digests["0"] == digests["1"]
    # Same global batch, same schedule: one step each at the same learning rates, to the same weights.
    assert two.metric("learning_rate=") == one.metric("learning_rate=")
    assert one.metric("learning_rate=")[-1] == "0.000e+00"
    assert len(two.lines("step=")) == 8
    # Float summation order differs between 1 and 2 processes. Adam turns the pure rounding noise of
    # qa_outputs.bias into full-size steps: its exact gradient is zero (softmax ignores a constant shift).
    # Mismatched batches would move weights by ~1e-3 here.
    assert_same_weights(
        load_weights(tmp_path / "one" / "model"),
        load_weights(tmp_path / "two" / "model"),
        atol=1e-4,
        skip=("qa_outputs.bias",),
    )


def history_without_timing(model_dir) -> list[dict]:
    history = json.loads((model_dir / LOG_HISTORY_FILE).read_text())
    return [{k: v for k, v in entry.items() if k not in ("samples_per_second", LOG_TIME)} for entry in history]


def resumed_step(run) -> int | None:
    match = re.search(r"resumed from step-\d{8}: step (\d+)", run.output)
    return int(match.group(1)) if match else None


def after_step(step: int):
    return lambda line: line.startswith(f"step={step} ")


@pytest.mark.parametrize("processes", [1, 2])
def test_spot_interruptions_then_resume_match_an_uninterrupted_run(
    tmp_path, tiny_dropout_model_dir, sample_features, uninterrupted, processes
):
    """One job retried through what a spot reclaim and a stop do to it: every process SIGKILLed (no handler runs)
    before the first checkpoint, then in the middle of one (files written, the last rank's marker not), then a
    SIGTERM (a stop, or the reclaim notice) that checkpoints on the way out. Each retry resumes from the newest
    complete checkpoint, and the final weights and log history are those of a run that was never interrupted."""
    hps = spot_hps(processes)
    ref, reference = uninterrupted(processes)
    total = len(reference.lines("step="))

    work = tmp_path / "spot"
    before_first = run_training(tiny_dropout_model_dir, sample_features, work, hps, processes, kill_when=after_step(3))
    assert before_first.returncode != 0 and "-- SIGKILL to" in before_first.output

    mid_write = run_training(
        tiny_dropout_model_dir,
        sample_features,
        work,
        hps,
        processes,
        kill_when=lambda line: line.startswith("PAUSED in checkpoint 10"),
        instrument={"QA_TEST_PAUSE_IN_CHECKPOINT": "10"},
    )
    assert resumed_step(mid_write) is None, "nothing to resume from: killed before the first checkpoint"
    assert mid_write.returncode != 0 and "-- SIGKILL to" in mid_write.output, mid_write.output[-3000:]
    torn = work / "checkpoints" / "step-00000010"
    assert any(torn.glob("random_states_*.pkl"))  # begun; rank 0 may still have been writing the model
    assert not (torn / f"COMPLETE.rank{processes - 1}.json").exists()

    stopped = run_training(tiny_dropout_model_dir, sample_features, work, hps, processes, sigterm_at_step=12)
    assert resumed_step(stopped) == 5, stopped.output[-3000:]
    assert "skipping incomplete checkpoint step-00000010" in stopped.output
    assert stopped.returncode != 0
    assert "stop requested (SIGTERM)" in stopped.output
    saved = sorted(p.name for p in (work / "checkpoints").iterdir())
    stopped_at = int(saved[-1].split("-")[1])
    assert 12 <= stopped_at < total
    assert not (work / "model" / "model.safetensors").exists()
    # What a SIGKILL during a checkpoint write leaves behind, newer than the stop's checkpoint: a step without
    # (all) markers.
    shutil.copytree(work / "checkpoints" / saved[-1], work / "checkpoints" / f"step-{stopped_at + 2:08d}")
    (work / "checkpoints" / f"step-{stopped_at + 2:08d}" / "COMPLETE.rank0.json").unlink()

    final = run_training(tiny_dropout_model_dir, sample_features, work, hps, processes)
    assert final.returncode == 0, final.output[-3000:]
    assert f"resumed from {saved[-1]}: step {stopped_at}" in final.output
    assert f"skipping incomplete checkpoint step-{stopped_at + 2:08d}" in final.output
    assert final.lines("step=")[0].startswith(f"step={stopped_at + 1} ")
    assert_same_weights(load_weights(ref / "model"), load_weights(work / "model"))
    # The log history travels in the checkpoints: the resumed run's holds every step, as the reference's.
    assert history_without_timing(work / "model") == history_without_timing(ref / "model")
    # Pruned to the newest two, the torn checkpoints included (the sync mirrors the deletions to S3).
    newest = [f"step-{step:08d}" for step in range(CHECKPOINT_STEPS, total + 1, CHECKPOINT_STEPS)][-2:]
    assert sorted(p.name for p in (work / "checkpoints").iterdir()) == newest


def test_ordinary_steps_make_no_host_sync_and_no_collective(tmp_path, tiny_model_dir, sample_features):
    """Counted on 2 processes (gloo): logging steps (every 4) reduce the loss once, control steps (every 6)
    agree on the stop flag and the timer once; every other step asks the host for nothing."""
    log_dir = tmp_path / "syncs"
    hps = {
        **BASE,
        "max_steps": 13,
        "per_device_train_batch_size": 2,
        "logging_steps": 4,
        "control_steps": 6,
        "checkpoint_minutes": 60,
    }
    run = run_training(
        tiny_model_dir, sample_features, tmp_path, hps, processes=2, instrument={"QA_TEST_SYNC_LOG": str(log_dir)}
    )
    assert run.returncode == 0, run.output[-3000:]
    assert "backend=gloo world_size=2" in run.output
    # DDP as configured for gloo: buckets as gradient views, no buffer broadcast per forward, no bf16 hook.
    assert "ddp: bucket_cap_mb=100 gradient_as_bucket_view=True sync_buffers_every_forward=False comm_hook=none" in (
        run.output
    )
    for rank in (0, 1):
        events = json.loads((log_dir / f"rank{rank}.json").read_text())
        assert any(batch == 0 for batch, _ in events), "start-up syncs are counted (the instrument works)"
        per_batch = {b: Counter(name for batch, name in events if batch == b) for b in range(1, 13)}
        expected: dict[int, Counter[str]] = {b: Counter() for b in range(1, 13)}
        for b in (4, 8, 12):  # the loss and the gradient norm, reduced and read together
            expected[b].update({"all_reduce": 1, "tolist": 1})
        for b in (6, 12):
            expected[b].update({"all_reduce": 1, "tolist": 1})
        assert per_batch == expected, f"rank {rank}"
