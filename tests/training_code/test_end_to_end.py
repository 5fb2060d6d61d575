"""preprocess -> train -> evaluate on the bundled sample dataset, through the SageMaker-style interfaces."""

from __future__ import annotations

import json
import tarfile

import evaluate
import pytest

from local_runner.serving import invoke
from tests.training_code.runner import run_training

pytestmark = pytest.mark.slow


def run_evaluate(model_dir, sample_features, out_dir) -> dict:
    assert (
        evaluate.main(
            [
                "--model-dir",
                str(model_dir),
                "--validation-dir",
                str(sample_features / "validation"),
                "--output-dir",
                str(out_dir),
            ]
        )
        == 0
    )
    return json.loads((out_dir / "evaluation.json").read_text())


def test_fine_tuning_beats_the_untrained_model(tmp_path, pretrained_dir, sample_features):
    untrained = run_evaluate(pretrained_dir, sample_features, tmp_path / "untrained")
    hps = {
        "epochs": 3,
        "learning_rate": 3e-4,
        "per_device_train_batch_size": 16,
        "warmup_ratio": 0.1,
        "logging_steps": 10,
        "checkpoint_steps": 1000,
        "precision": "bf16",
    }
    run = run_training(pretrained_dir, sample_features, tmp_path, hps)
    assert run.returncode == 0, run.output[-3000:]
    model_dir = tmp_path / "model"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in model_dir.iterdir()}
    # Evaluate reads SageMaker's model.tar.gz as well as a directory.
    archive_dir = tmp_path / "packed"
    archive_dir.mkdir()
    with tarfile.open(archive_dir / "model.tar.gz", "w:gz") as tar:
        for path in model_dir.iterdir():
            tar.add(path, arcname=path.name)
    trained = run_evaluate(archive_dir, sample_features, tmp_path / "trained")
    f1_before, f1_after = untrained["metrics"]["f1"]["value"], trained["metrics"]["f1"]["value"]
    assert f1_after >= f1_before + 25, (f1_before, f1_after)
    assert 0 <= trained["metrics"]["exact_match"]["value"] <= f1_after
    predictions = json.loads((tmp_path / "trained" / "predictions.json").read_text())
    assert len(predictions) == trained["examples"] == 84
    # The endpoint (inference toolkit contract, code/inference.py inside model.tar.gz) answers as Evaluate scored.
    examples = [json.loads(line) for line in (sample_features / "validation" / "examples.jsonl").open()][:3]
    container = {"Environment": {"SAGEMAKER_PROGRAM": "inference.py"}, "ModelDataUrl": "model.tar.gz"}
    request = {"inputs": [{"question": e["question"], "context": e["context"]} for e in examples]}
    answers = invoke(container, archive_dir / "model.tar.gz", tmp_path / "endpoint", request)
    assert [a["answer"] for a in answers] == [predictions[e["id"]] for e in examples]
