"""Evaluation inside the training job: the validation channel scored on every process, reported once."""

from __future__ import annotations

import json
import re
import shutil
import tarfile

import pytest
from qa.evaluation import Evaluation, ValidationSet, length_sorted_batches
from qa.feature_files import EXAMPLES_FILE, FEATURES_FILE
from qa.metrics import squad_scores
from qa.outputs import (
    EVALUATION_FILE,
    EVALUATION_PREFIX,
    PREDICTIONS_FILE,
    SAGEMAKER_PROGRAM_ENV,
    SERVING_PROGRAM,
    STATS_FILE,
    STATS_OUTPUT,
    VALIDATION_CHANNEL,
    evaluation_metric_path,
    metric_name,
    metric_regexes,
)
from tasks import question_answering

from local_runner.serving import LocalEndpoint
from tests.training_code.conftest import FINISHED_RUN
from tests.training_code.runner import run_training, single_process_evaluation


def json_path(document: dict, dotted: str):
    for key in dotted.split("."):
        document = document[key]
    return document


def test_batches_are_length_sorted_and_cover_every_feature_once():
    features = [{"input_ids": [0] * n} for n in (3, 7, 5, 7, 1)]
    batches = length_sorted_batches(features, 2)
    assert batches == [[1, 3], [2, 0], [4]]  # longest first, ties in file order


def test_the_report_and_the_line_carry_the_contract_paths_and_metric_regexes():
    evaluation = Evaluation({"exact_match": 61.904761, "f1": 70.123456}, predictions={"a": "x", "b": ""})
    report = evaluation.report()
    assert json_path(report, evaluation_metric_path("f1")) == 70.1235
    assert json_path(report, evaluation_metric_path("exact_match")) == 61.9048
    assert report["examples"] == 2
    line = evaluation.line()
    regexes = metric_regexes(EVALUATION_PREFIX, question_answering.METRICS)
    f1, exact_match = (re.search(regexes[metric_name(EVALUATION_PREFIX, m)], line) for m in ("f1", "exact_match"))
    assert f1 is not None and f1.group(1) == "70.1235"
    assert exact_match is not None and exact_match.group(1) == "61.9048"


def test_a_validation_channel_without_the_preprocessed_files_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"has no {FEATURES_FILE} and no {EXAMPLES_FILE}: give it"):
        ValidationSet.load(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_training_evaluates_once_and_equals_a_single_process_evaluation(finished_run, sample_features, processes):
    work, run = finished_run(processes)
    batch_size = FINISHED_RUN["eval_batch_size"]
    [line] = run.lines("evaluation: ")
    report = json.loads((work / "model" / EVALUATION_FILE).read_text())
    predictions = json.loads((work / "output-data" / PREDICTIONS_FILE).read_text())
    assert not (work / "model" / PREDICTIONS_FILE).exists()  # kept out of model.tar.gz

    reference = single_process_evaluation(work / "model", sample_features / VALIDATION_CHANNEL, batch_size)
    assert line == reference.line()
    assert report == reference.report()
    assert predictions == reference.predictions
    assert len(predictions) == 84 and any(predictions.values())


@pytest.mark.slow
def test_the_gate_f1_is_the_f1_of_the_model_the_endpoint_serves(finished_run, sample_features, tmp_path):
    """CheckF1 compares FineTune's `eval:f1`, parsed from the evaluation line by the job's metric definitions
    (SageMaker's FinalMetricDataList), and evaluation.json records it. Asked the same validation questions,
    windowed as preprocess.py windowed them, the packaged model answers through the inference toolkit's
    contract (one container process: model_fn, then predict_fn; inference.py) exactly as the gate scored it.
    The run is the 2-process one: the gate's logits were gathered from both ranks."""
    work, run = finished_run(2)
    [line] = run.lines("evaluation: ")
    gate_f1 = re.search(metric_regexes(EVALUATION_PREFIX, question_answering.METRICS)["eval:f1"], line)
    assert gate_f1 is not None
    report = json.loads((work / "model" / EVALUATION_FILE).read_text())
    gate_predictions = json.loads((work / "output-data" / PREDICTIONS_FILE).read_text())

    archive = tmp_path / "model.tar.gz"  # what SageMaker uploads of SM_MODEL_DIR
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((work / "model").iterdir()):
            tar.add(path, arcname=path.name)
    container = {"ModelDataUrl": str(archive), "Environment": {SAGEMAKER_PROGRAM_ENV: SERVING_PROGRAM}}
    examples = ValidationSet.load(sample_features / VALIDATION_CHANNEL).examples
    stats = json.loads((sample_features / STATS_OUTPUT / STATS_FILE).read_text())
    request = {
        "inputs": [{"question": e["question"], "context": e["context"]} for e in examples],
        "parameters": {"max_seq_length": stats["max_seq_length"], "doc_stride": stats["doc_stride"]},
    }
    with LocalEndpoint(container, archive, tmp_path / "endpoint") as endpoint:
        answers = endpoint.invoke(request)
    served = {example["id"]: answer["answer"] for example, answer in zip(examples, answers, strict=True)}
    served_f1 = squad_scores(served, {e["id"]: e["answers"]["text"] for e in examples})["f1"]

    assert served == gate_predictions and any(served.values())
    assert f"{served_f1:.4f}" == gate_f1.group(1)
    assert round(served_f1, 4) == json_path(report, evaluation_metric_path("f1"))


def test_an_empty_validation_channel_stops_the_job_before_training(tmp_path, tiny_model_dir, sample_features):
    features = tmp_path / "features"
    shutil.copytree(sample_features / "train", features / "train")
    (features / VALIDATION_CHANNEL).mkdir()
    run = run_training(tiny_model_dir, features, tmp_path / "work", {"max_steps": 1})
    assert run.returncode == 1, run.output[-3000:]
    assert f"error: validation channel {features / VALIDATION_CHANNEL} has no {FEATURES_FILE}" in run.output
    assert not run.lines("step=") and "Traceback" not in run.output
