"""Evaluation during training, early stopping and the best checkpoint kept as the model (qa/fine_tune.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from qa.checkpoints import model_weights, read_loop_state, step_dir
from qa.outputs import (
    EVAL_LOG_PREFIX,
    LOG_EPOCH,
    LOG_EVAL_LOSS,
    LOG_HISTORY_FILE,
    LOG_STEP,
    LOG_TIME,
    TENSORBOARD_RUN,
    eval_log_keys,
)
from qa.postprocess import answer_positions, question_answering_loss
from tasks import question_answering

from tests.training_code.runner import TrainRun, load_weights, run_training

EVAL_F1 = EVAL_LOG_PREFIX + "f1"  # the log history's validation F1, the gate metric early stopping follows

pytestmark = pytest.mark.slow

# 1 process, 4 samples a step, evaluated every 2 steps; a checkpoint every 4 and only 1 kept (so pruning must spare
# the best); patience 2. A high learning rate makes the F1 of the tiny random model stall (measured: 3.17 at step 2,
# 3.17 at step 4, 1.19 at step 6: stopped at 6, model of step 2).
EARLY_STOPPING_RUN: dict[str, object] = {
    "epochs": 1,
    "max_steps": 12,
    "per_device_train_batch_size": 4,
    "learning_rate": 0.3,
    "logging_steps": 2,
    "checkpoint_minutes": 0,
    "checkpoint_steps": 4,
    "keep_checkpoints": 1,
    "control_steps": 1,
    "eval_batch_size": 16,
    "evaluation_strategy": "steps",
    "evaluation_steps": 2,
    "early_stopping_patience": 2,
}


def saved_weights(model_dir: Path) -> dict:
    """The saved model's weights under the names the training module has (save_pretrained may rename some)."""
    from transformers import AutoModelForQuestionAnswering

    return AutoModelForQuestionAnswering.from_pretrained(str(model_dir)).state_dict()


def same_tensors(left: dict, right: dict) -> bool:
    return left.keys() == right.keys() and all(bool((left[k] == right[k]).all()) for k in left)


def evaluations(work: Path) -> list[dict]:
    history = json.loads((work / "model" / LOG_HISTORY_FILE).read_text())
    return [entry for entry in history if EVAL_F1 in entry]


def expected_stop(during: list[dict], patience: int) -> tuple[int, int]:
    """(step training stops at, step of the best F1) by the rule: `patience` evaluations without a better F1."""
    best, best_step, since = None, 0, 0
    for entry in during:
        if best is None or entry[EVAL_F1] > best:
            best, best_step, since = entry[EVAL_F1], entry["step"], 0
        else:
            since += 1
            if since >= patience:
                return entry["step"], best_step
    return during[-1]["step"], best_step


@pytest.fixture(scope="module")
def stopped_early(tmp_path_factory, tiny_model_dir, sample_features) -> tuple[Path, TrainRun]:
    work = tmp_path_factory.mktemp("early-stopping")
    run = run_training(tiny_model_dir, sample_features, work, EARLY_STOPPING_RUN)
    assert run.returncode == 0, run.output[-3000:]
    return work, run


def test_the_evaluation_loss_is_the_heads_cross_entropy_and_ignores_padding():
    import torch

    rng = np.random.default_rng(0)
    starts, ends = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    positions = np.array([[1, 2], [0, 0], [4, 4]])
    expected = (
        torch.nn.functional.cross_entropy(torch.tensor(starts), torch.tensor(positions[:, 0]))
        + torch.nn.functional.cross_entropy(torch.tensor(ends), torch.tensor(positions[:, 1]))
    ) / 2
    assert question_answering_loss(starts, ends, positions) == pytest.approx(float(expected), rel=1e-9)
    padded_starts, padded_ends = (np.concatenate([logits, np.full((3, 2), -1e4)], axis=1) for logits in (starts, ends))
    assert question_answering_loss(padded_starts, padded_ends, positions) == pytest.approx(float(expected), rel=1e-9)


def test_validation_labels_are_the_context_tokens_of_the_answer_or_cls_outside_the_window():
    # "[CLS] q [SEP] the cat sat [SEP]": the context tokens 3-5 cover characters 0-3, 4-7, 8-11.
    offsets = [None, None, None, [0, 3], [4, 7], [8, 11], None]
    features = [
        {"input_ids": [0] * 7, "offset_mapping": offsets, "example_id": "in"},
        {"input_ids": [0] * 7, "offset_mapping": offsets, "example_id": "out"},
    ]
    examples = [
        {"id": "in", "answers": {"text": ["cat sat"], "answer_start": [4]}},
        {"id": "out", "answers": {"text": ["mat"], "answer_start": [20]}},
    ]
    assert answer_positions(examples, features).tolist() == [[4, 5], [0, 0]]


def test_early_stopping_ends_after_the_patience_and_the_best_checkpoint_is_the_saved_model(stopped_early):
    work, run = stopped_early
    *during, final = evaluations(work)
    assert all(
        set(entry) == {LOG_STEP, LOG_EPOCH, LOG_TIME, *eval_log_keys(question_answering.METRICS)} for entry in during
    )
    assert [entry["step"] for entry in during] == list(range(2, during[-1]["step"] + 1, 2))  # every 2 steps
    stop, best = expected_stop(during, 2)  # EARLY_STOPPING_RUN's patience
    assert stop < 12, "the run must stop early for this test to mean anything"
    summary = json.loads((work / "model" / "training_summary.json").read_text())
    assert (summary["global_step"], summary["model_step"], summary["ended_by"]) == (stop, best, "early stopping")
    # The model saved is the best checkpoint's, and the F1 the gate reads is that model's.
    kept = load_weights(step_dir(work / "checkpoints", best))
    assert model_weights(step_dir(work / "checkpoints", best)).is_file()
    assert same_tensors(saved_weights(work / "model"), kept)
    [best_entry] = [entry for entry in during if entry["step"] == best]
    assert final["step"] == best and final[EVAL_F1] == pytest.approx(best_entry[EVAL_F1])
    [line] = run.lines("evaluation: ")
    assert line.endswith(f"f1={best_entry[EVAL_F1]:.4f}")


def test_the_evaluation_loss_is_in_the_tensorboard_curves_at_each_evaluation(stopped_early):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    work, _ = stopped_early
    *during, _ = evaluations(work)
    events = EventAccumulator(str(work / "tensorboard" / TENSORBOARD_RUN))
    events.Reload()
    losses = events.Scalars("eval/loss")
    assert [e.step for e in losses] == [entry["step"] for entry in during]
    assert [e.value for e in losses] == pytest.approx([entry[LOG_EVAL_LOSS] for entry in during], rel=1e-6)


def test_a_resumed_run_keeps_the_best_so_far_and_the_patience_count(
    stopped_early, tmp_path, tiny_model_dir, sample_features
):
    """A spot reclaim (SIGKILL) right after the step-4 checkpoint, which follows a non-improving evaluation: the
    resumed run must stop where the uninterrupted one did, with the same model. Lost patience would run longer,
    a lost best would keep a later model."""
    reference, uninterrupted = stopped_early
    first = run_training(
        tiny_model_dir,
        sample_features,
        tmp_path,
        EARLY_STOPPING_RUN,
        kill_when=lambda line: "checkpoint saved: step 4 " in line,
    )
    assert first.returncode != 0 and not (tmp_path / "model" / "training_summary.json").exists()
    state = read_loop_state(step_dir(tmp_path / "checkpoints", 4), 0)
    assert (state.best_step, state.evaluations_since_best) == (2, 1)  # the measured pattern: 3.17, then no better
    resumed = run_training(tiny_model_dir, sample_features, tmp_path, EARLY_STOPPING_RUN)
    assert resumed.returncode == 0, resumed.output[-3000:]
    assert "resumed from step-00000004" in resumed.output
    summaries = [json.loads((work / "model" / "training_summary.json").read_text()) for work in (reference, tmp_path)]
    assert summaries[0] == summaries[1]
    assert resumed.lines("evaluation: ") == uninterrupted.lines("evaluation: ")
    assert same_tensors(saved_weights(tmp_path / "model"), saved_weights(reference / "model"))


@pytest.mark.parametrize(
    ("strategy", "step", "batches_in_epoch", "due"),
    [
        ("no", 4, 4, False),
        ("steps", 4, 1, True),  # every 2 steps
        ("steps", 3, 1, False),
        ("epoch", 3, 10, True),  # the epoch's last batch
        ("epoch", 4, 9, False),
        ("epoch", 12, 3, True),  # the last step, whatever the cadence
    ],
)
def test_evaluations_follow_the_strategy_and_the_last_step_is_always_evaluated(strategy, step, batches_in_epoch, due):
    from types import SimpleNamespace

    from qa.fine_tune import Progress, evaluation_due

    run = SimpleNamespace(
        args=SimpleNamespace(evaluation_strategy=strategy, evaluation_steps=2),
        validation=object(),
        schedule=SimpleNamespace(total_steps=12),
        batches_per_epoch=10,
    )
    assert evaluation_due(run, Progress(global_step=step, batches_in_epoch=batches_in_epoch)) is due  # type: ignore[arg-type]


# Outside the tests every job starts a fresh interpreter: this whole job (train, evaluate, save) does too, so that
# nothing it needs is imported only by the pre-imported Python the other tests' jobs fork from (tests/warm_python.py).
@pytest.mark.usefixtures("cold_python")
def test_the_deadline_ends_training_then_the_model_is_evaluated_and_saved(tmp_path, tiny_model_dir, sample_features):
    """--stop_after_seconds counts from the job's start (loading the model and data alone takes longer than 1 ms):
    training stops at the first vote, and the job still evaluates and saves the model."""
    hps = {
        **EARLY_STOPPING_RUN,
        "evaluation_strategy": "epoch",
        "early_stopping_patience": 0,
        "stop_after_seconds": 0.001,
    }
    run = run_training(tiny_model_dir, sample_features, tmp_path, hps)
    assert run.returncode == 0, run.output[-3000:]
    summary = json.loads((tmp_path / "model" / "training_summary.json").read_text())
    assert (summary["global_step"], summary["model_step"], summary["ended_by"]) == (1, 1, "deadline")
    assert len(run.lines("evaluation: ")) == 1 and (tmp_path / "model" / "model.safetensors").is_file()
