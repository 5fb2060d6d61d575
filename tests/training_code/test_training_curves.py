"""Training curves where users look for them: TensorBoard event files (main process) and the log history."""

from __future__ import annotations

import json

import pytest
from qa.outputs import EVALUATION_FILE, LOG_HISTORY_FILE, LOG_TIME, TENSORBOARD_RUN, TRAIN_LOG_KEYS, eval_log_keys
from tasks import question_answering

pytestmark = pytest.mark.slow


def test_two_processes_write_one_tensorboard_run_and_the_log_history(finished_run):
    """The shared 2-process run: 6 steps, logged every 2."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tmp_path, run = finished_run(2)

    history = json.loads((tmp_path / "model" / LOG_HISTORY_FILE).read_text())
    *training, evaluation = history
    assert [entry["step"] for entry in training] == [2, 4, 6]
    assert all(set(entry) == {"step", "epoch", LOG_TIME, *TRAIN_LOG_KEYS} for entry in training)
    times = [entry[LOG_TIME] for entry in history]
    assert times == sorted(times) and times[-1] - times[0] < 600, "each entry's wall time, in the order logged"
    assert [f"{entry['loss']:.4f}" for entry in training] == run.metric("loss=")
    assert all(entry["grad_norm"] > 0 and entry["samples_per_second"] > 0 for entry in training)
    report = json.loads((tmp_path / "model" / EVALUATION_FILE).read_text())
    assert (
        set(evaluation) == {"step", "epoch", LOG_TIME, *eval_log_keys(question_answering.METRICS)}
        and evaluation["step"] == 6
    )
    assert round(evaluation["eval_f1"], 4) == report["metrics"]["f1"]["value"]

    # One writer (the main process), read back with TensorBoard's own reader.
    runs = list((tmp_path / "tensorboard").iterdir())
    assert [p.name for p in runs] == [TENSORBOARD_RUN]
    assert len(list(runs[0].glob("events.out.tfevents.*"))) == 1
    events = EventAccumulator(str(runs[0]))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {f"train/{key}" for key in TRAIN_LOG_KEYS} | {"eval/f1", "eval/exact_match"} <= tags
    losses = events.Scalars("train/loss")
    assert [e.step for e in losses] == [2, 4, 6]
    assert [e.value for e in losses] == pytest.approx([entry["loss"] for entry in training], rel=1e-6)
    [f1] = events.Scalars("eval/f1")
    assert (f1.step, f1.value) == (6, pytest.approx(evaluation["eval_f1"], rel=1e-6))
