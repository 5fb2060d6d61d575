"""The phases of train.py on their own: where a resumed run starts, and what a checkpoint records."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from qa import checkpoints, fine_tune
from qa.base_model import load_question_answering_model
from qa.batching import model_outputs
from qa.evaluation import ValidationSet
from qa.fine_tune import LossInterval, Progress, Schedule, batch_collator, evaluate, resume
from qa.outputs import VALIDATION_CHANNEL
from tasks import question_answering


@dataclass
class Prepared:
    """A one-process CPU Accelerator with a model, optimizer and scheduler registered for save/load."""

    accelerator: Accelerator
    model: torch.nn.Module

    def label(self, value: float) -> None:
        """Fill every weight with `value`: a checkpoint's weights then say which one was loaded."""
        with torch.no_grad():
            for parameter in self.model.parameters():
                parameter.fill_(value)

    def loaded_label(self) -> float:
        return next(self.model.parameters()).flatten()[0].item()

    def checkpoint(self, checkpoint_dir: Path, position: checkpoints.LoopState, complete: bool = True) -> None:
        """A checkpoint of the current weights as train.py writes one; without its marker when not complete
        (a kill during the save)."""
        target = checkpoints.step_dir(checkpoint_dir, position.global_step)
        checkpoints.begin(target, 0)
        self.accelerator.save_state(str(target), safe_serialization=True)
        checkpoints.write_rank_manifest(target, 0, position)
        if not complete:
            (target / "COMPLETE.rank0.json").unlink()


@pytest.fixture
def prepared() -> Iterator[Prepared]:
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    yield Prepared(accelerator, model)
    AcceleratorState._reset_state(reset_partial_state=True)  # as accelerate's own tests do


def test_resume_loads_the_newest_complete_checkpoint_and_starts_at_its_position(prepared, tmp_path, caplog):
    for step, complete in ((4, True), (6, True), (9, False)):
        prepared.label(step)
        prepared.checkpoint(tmp_path, checkpoints.LoopState(step, step // 4, step % 4, step * 16), complete)
    prepared.label(0)

    progress = resume(prepared.accelerator, tmp_path)

    assert prepared.loaded_label() == 6
    assert (progress.global_step, progress.epoch, progress.batches_in_epoch, progress.samples_seen) == (6, 1, 2, 96)
    assert progress.complete_steps == [6]
    assert progress.resume_rng is not None  # mid-epoch: re-applied after the first batch of the resumed iterator
    assert "skipping incomplete checkpoint step-00000009" in caplog.text


def test_resume_at_the_start_of_an_epoch_keeps_the_rng_as_loaded(prepared, tmp_path):
    prepared.checkpoint(tmp_path, checkpoints.LoopState(8, 2, 0, 128))
    progress = resume(prepared.accelerator, tmp_path)
    assert (progress.global_step, progress.epoch, progress.batches_in_epoch) == (8, 2, 0)
    assert progress.resume_rng is None


def test_without_a_complete_checkpoint_training_starts_from_scratch(prepared, tmp_path):
    prepared.label(5)
    prepared.checkpoint(tmp_path, checkpoints.LoopState(5, 0, 5, 80), complete=False)
    prepared.label(1)

    assert resume(prepared.accelerator, tmp_path) == Progress()
    assert resume(prepared.accelerator, tmp_path / "missing") == Progress()
    assert prepared.loaded_label() == 1


@pytest.mark.parametrize(
    ("batches_in_epoch", "recorded"),
    [(3, checkpoints.LoopState(10, 1, 3, 160)), (5, checkpoints.LoopState(10, 2, 0, 160))],
)
def test_a_checkpoint_at_the_end_of_an_epoch_resumes_at_the_start_of_the_next(batches_in_epoch, recorded):
    progress = Progress(global_step=10, epoch=1, batches_in_epoch=batches_in_epoch, samples_seen=160)
    assert progress.position(batches_per_epoch=5) == recorded


class DeviceStillBusy:
    """Reduced values whose `.tolist()` returns only when the device has finished, `seconds` from now."""

    def __init__(self, values: torch.Tensor, seconds: float) -> None:
        self.values, self.seconds = values, seconds

    def tolist(self) -> list[float]:
        time.sleep(self.seconds)
        return self.values.tolist()


def test_throughput_is_measured_after_the_device_finished_the_interval():
    accelerator = SimpleNamespace(
        reduce=lambda tensor, reduction: DeviceStillBusy(tensor, 0.3), num_processes=1, is_main_process=True
    )
    run = SimpleNamespace(
        accelerator=accelerator,
        args=SimpleNamespace(per_device_train_batch_size=8),
        schedule=Schedule(global_batch=8, updates_per_epoch=4, total_steps=8, warmup_steps=0),
        scheduler=SimpleNamespace(get_last_lr=lambda: [1e-5]),
    )
    interval = LossInterval(torch.zeros(()))
    interval.add(torch.tensor(1.0), None)
    interval.add(torch.tensor(3.0), torch.tensor(0.5))
    before = time.time()
    entry = interval.read_and_restart(run, Progress(global_step=2))  # type: ignore[arg-type]
    assert before <= entry.pop("time") <= time.time(), "the wall time the entry was logged"
    assert {k: v for k, v in entry.items() if k != "samples_per_second"} == {
        "step": 2,
        "epoch": 0.5,
        "loss": 2.0,
        "learning_rate": 1e-5,
        "grad_norm": 0.5,
    }
    # 16 samples whose work ends 0.3 s after the log call: at most 16 / 0.3 samples per second.
    assert entry["samples_per_second"] <= 16 / 0.3
    assert interval.batches == 0 and float(interval.total) == 0.0 and interval.grad_norm is None


@pytest.fixture
def bf16_accelerator() -> Iterator[Accelerator]:
    """A one-process CPU Accelerator in bf16 mixed precision: `prepare` wraps a model's forward in autocast, as on
    a GPU with bf16 (fp16 on V100s)."""
    yield Accelerator(cpu=True, mixed_precision="bf16")
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture
def tf32_matmuls() -> Iterator[None]:
    """TF32 matmuls on, as `build` turns them on for training on GPUs (a flag only, on a CPU)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def test_evaluation_scores_in_float32_as_the_endpoint_serves_and_training_keeps_autocast(
    bf16_accelerator, tf32_matmuls, tiny_model_dir, tokenizer, sample_features, tmp_path, monkeypatch
):
    """The F1 that decides registration is the endpoint's: inference.py serves float32 weights without autocast
    and without TF32 (qa.answering.QuestionAnswerer). Evaluating through `unwrap_model` with its default
    keep_fp32_wrapper=True kept the autocast forward, so the gate scored bf16 logits. The training step after an
    evaluation still runs under autocast: unwrapping takes the wrapper off the module that training calls."""
    accelerator = bf16_accelerator
    model = load_question_answering_model(str(tiny_model_dir), logging.getLogger("qa"))
    served = copy.deepcopy(model).eval()  # the same float32 weights, never prepared: as the endpoint loads them
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    prepared, optimizer = accelerator.prepare(model, optimizer)
    head_dtypes: list[torch.dtype] = []
    head = accelerator.unwrap_model(prepared).qa_outputs
    head.register_forward_hook(lambda _, __, out: head_dtypes.append(out.dtype))  # autocast: bf16 out of a Linear

    validation = ValidationSet.load(sample_features / VALIDATION_CHANNEL)
    features = validation.features[:14]
    examples = [e for e in validation.examples if e["id"] in {f["example_id"] for f in features}]
    batches = [list(range(0, 7)), list(range(7, 14))]
    collator = batch_collator(tokenizer, served)
    expected = model_outputs(served, collator, features, batches, "cpu", question_answering.feature_output)
    head_dtypes.clear()
    autocast = model_outputs(prepared, collator, features, batches, "cpu", question_answering.feature_output)
    assert set(head_dtypes) == {torch.bfloat16}
    assert any(not (a[1] == b[1]).all() for a, b in zip(autocast, expected, strict=True))

    evaluated, tf32_while_evaluating = [], []

    def recording_model_outputs(*args):
        tf32_while_evaluating.append(torch.backends.cuda.matmul.allow_tf32)
        evaluated.extend(model_outputs(*args))
        return evaluated

    monkeypatch.setattr(fine_tune, "model_outputs", recording_model_outputs)
    run = SimpleNamespace(
        task=question_answering,
        label_names=None,
        validation=ValidationSet(features, examples),
        benchmark=None,
        accelerator=accelerator,
        args=SimpleNamespace(
            eval_batch_size=7,
            output_dir=tmp_path / "model",
            output_data_dir=tmp_path / "data",
            evaluation_strategy="no",
        ),
        model=prepared,
        tokenizer=tokenizer,
        schedule=Schedule(global_batch=4, updates_per_epoch=1, total_steps=1, warmup_steps=0),
    )
    prepared.train()
    head_dtypes.clear()
    assert evaluate(run, Progress(), model_step=1) is not None  # type: ignore[arg-type]
    assert set(head_dtypes) == {torch.float32} and tf32_while_evaluating == [False]
    by_feature = {index: (starts, ends) for index, (starts, ends) in expected}
    assert len(evaluated) == len(features)
    for index, (starts, ends) in evaluated:
        assert np.array_equal(starts, by_feature[index][0]) and np.array_equal(ends, by_feature[index][1])

    # Training goes on as before the evaluation: train mode, autocast, TF32 as `build` set it.
    assert prepared.training and torch.backends.cuda.matmul.allow_tf32
    head_dtypes.clear()
    batch = collator([{k: f[k] for k in ("input_ids", "token_type_ids", "attention_mask")} for f in features[:4]])
    labels = torch.zeros(4, dtype=torch.long)
    accelerator.backward(prepared(**batch, start_positions=labels, end_positions=labels).loss)
    assert set(head_dtypes) == {torch.bfloat16}


@pytest.mark.parametrize("flag", ["true", "auto", "false"])
def test_the_compile_flag_never_compiles_on_a_cpu_and_auto_resolves_to_the_cpu_values(
    flag, tiny_model_dir, sample_features, tmp_path, monkeypatch
):
    """--compile true is the pipeline's decision for the GPU it priced (qa.cost.compile_pays): on a CPU (dev's
    g5.2xlarge default passes true to the local runner's CPU job) nothing is compiled; auto in train.py alone stays
    off. On CPU the "auto" batch, learning rate and warm-up are the demo's 8, 3e-5 and 0.1."""
    import train

    calls: list[dict] = []

    def fake_compile(model, **kwargs):
        calls.append(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    args = train.parse_args(
        [
            "--model_name_or_path", str(tiny_model_dir),
            "--train_dir", str(sample_features / "train"),
            "--validation_dir", str(tmp_path / "none"),
            "--benchmark_dir", str(tmp_path / "none"),
            "--tensorboard_dir", str(tmp_path / "tb"),
            "--checkpoint_dir", str(tmp_path / "ckpt"),
            "--compile", flag,
        ]
    )  # fmt: skip
    try:
        run = fine_tune.build(args)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    assert run is not None
    assert calls == [] and args.compile is False
    assert (args.per_device_train_batch_size, args.learning_rate, args.warmup_ratio) == (8, 3e-5, 0.1)
