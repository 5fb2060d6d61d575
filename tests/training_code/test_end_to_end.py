"""preprocess -> train (and evaluate) -> serve on the bundled sample dataset, through the SageMaker-style
interfaces."""

from __future__ import annotations

import json
import tarfile

import pytest
from qa.feature_files import EXAMPLES_FILE
from qa.outputs import EVALUATION_FILE, PREDICTIONS_FILE, VALIDATION_CHANNEL

from local_runner.serving import invoke
from tests.training_code.runner import run_training, single_process_evaluation

pytestmark = pytest.mark.slow


def test_fine_tuning_beats_the_untrained_model(tmp_path, pretrained_dir, sample_features):
    untrained = single_process_evaluation(pretrained_dir, sample_features / VALIDATION_CHANNEL, 32)
    # 2 epochs of batches of 4 (210 steps) learn the sample set on every seed tried (F1 84-100 on seeds 3, 7,
    # 42), in 3/4 of the time of 3 epochs of 16 (81 steps; F1 39-95 on the same seeds).
    hps = {
        "epochs": 2,
        "learning_rate": 2e-4,
        "per_device_train_batch_size": 4,
        "warmup_ratio": 0.1,
        "logging_steps": 10,
        "checkpoint_steps": 1000,
        "precision": "bf16",
    }
    run = run_training(pretrained_dir, sample_features, tmp_path, hps)
    assert run.returncode == 0, run.output[-3000:]
    model_dir = tmp_path / "model"
    assert {"config.json", "model.safetensors", "tokenizer.json", EVALUATION_FILE} <= {
        p.name for p in model_dir.iterdir()
    }
    trained = json.loads((model_dir / EVALUATION_FILE).read_text())  # SageMaker's model-quality shape
    f1_after = trained["metrics"]["f1"]["value"]
    assert f1_after >= untrained.metrics["f1"] + 25, (untrained.metrics["f1"], f1_after)
    assert 0 <= trained["metrics"]["exact_match"]["value"] <= f1_after
    predictions = json.loads((tmp_path / "output-data" / PREDICTIONS_FILE).read_text())
    assert len(predictions) == trained["examples"] == 84
    # The endpoint (inference toolkit contract, code/inference.py inside model.tar.gz) answers as evaluation scored.
    archive = tmp_path / "packed" / "model.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        for path in model_dir.iterdir():
            tar.add(path, arcname=path.name)
    examples = [json.loads(line) for line in (sample_features / VALIDATION_CHANNEL / EXAMPLES_FILE).open()][:3]
    container = {"Environment": {"SAGEMAKER_PROGRAM": "inference.py"}, "ModelDataUrl": "model.tar.gz"}
    request = {"inputs": [{"question": e["question"], "context": e["context"]} for e in examples]}
    answers = invoke(container, archive, tmp_path / "endpoint", request)
    assert [a["answer"] for a in answers] == [predictions[e["id"]] for e in examples]
