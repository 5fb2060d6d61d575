"""Data-parallel training and spot-safe resume, run the way SageMaker runs the script."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from tests.training_code.runner import load_weights, run_training

pytestmark = pytest.mark.slow

BASE = {
    "epochs": 1,
    "learning_rate": 5e-4,
    "warmup_ratio": 0.2,
    "logging_steps": 1,
    "seed": 11,
    "precision": "bf16",  # resolved to full precision on CPU
    "group_by_length": "true",
}


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
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(str(sample_features / "train" / "features.parquet"))
    lengths = pc.list_value_length(table.column("input_ids"))
    mode = pc.mode(lengths)[0]["mode"].as_py()
    subset = table.filter(pc.equal(lengths, mode))
    assert subset.num_rows >= 64
    out = tmp_path_factory.mktemp("equal-length")
    (out / "train").mkdir()
    pq.write_table(subset, str(out / "train" / "features.parquet"))
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
    assert "processes=2" in two.output
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


@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_then_resume_matches_an_uninterrupted_run(tmp_path, tiny_dropout_model_dir, sample_features, processes):
    hps = {**BASE, "epochs": 2, "per_device_train_batch_size": 16 // processes, "checkpoint_steps": 7}
    reference = run_training(tiny_dropout_model_dir, sample_features, tmp_path / "ref", hps, processes)
    assert reference.returncode == 0, reference.output[-3000:]
    total = len(reference.lines("step="))

    work = tmp_path / "spot"
    interrupted = run_training(tiny_dropout_model_dir, sample_features, work, hps, processes, sigterm_at_step=10)
    assert interrupted.returncode != 0
    assert "stop requested (SIGTERM)" in interrupted.output
    saved = sorted(p.name for p in (work / "checkpoints").iterdir())
    interrupted_at = int(saved[-1].split("-")[1])
    assert 10 <= interrupted_at < total
    assert not (work / "model" / "model.safetensors").exists()

    # What a SIGKILL during a checkpoint write leaves behind: a partial dir and a newer step without markers.
    shutil.copytree(work / "checkpoints" / saved[-1], work / "checkpoints" / f".partial-step-{interrupted_at + 1:08d}")
    torn = work / "checkpoints" / f"step-{interrupted_at + 2:08d}"
    shutil.copytree(work / "checkpoints" / saved[-1], torn)
    (torn / "COMPLETE.rank0.json").unlink()

    resumed = run_training(tiny_dropout_model_dir, sample_features, work, hps, processes)
    assert resumed.returncode == 0, resumed.output[-3000:]
    assert f"resumed from {saved[-1]}: step {interrupted_at}" in resumed.output
    assert f"skipping incomplete checkpoint step-{interrupted_at + 2:08d}" in resumed.output
    assert resumed.lines("step=")[0].startswith(f"step={interrupted_at + 1} ")
    assert_same_weights(load_weights(tmp_path / "ref" / "model"), load_weights(work / "model"))
