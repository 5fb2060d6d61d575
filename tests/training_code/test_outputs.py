"""qa/outputs.py: each log line the training job prints and the pattern that reads it back agree; the model-quality
report holds each metric at its JSON path."""

from __future__ import annotations

import re
from pathlib import Path
from string import Formatter

from qa import checkpoints
from qa.outputs import (
    CHECKPOINT_SAVED,
    CHECKPOINT_SAVED_LOG,
    CHECKPOINT_WRITING,
    CHECKPOINT_WRITING_LOG,
    EVALUATION_PREFIX,
    LOG_EPOCH,
    LOG_GRAD_NORM,
    LOG_STEP,
    TRAIN_LOG_KEYS,
    TRAINING_LINE,
    TRAINING_METRIC_REGEXES,
    TRAINING_STEP,
    evaluation_line,
    evaluation_metric_path,
    metric_regexes,
    model_quality_metrics,
)
from tasks import TASK_NAMES, task


def captured(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, (pattern, text)
    return match.group(1)


def test_the_training_line_prints_the_log_history_keys_and_its_regexes_read_each_back():
    fields = {name for _, name, _, _ in Formatter().parse(TRAINING_LINE) if name}
    assert fields == {LOG_STEP, LOG_EPOCH, *TRAIN_LOG_KEYS} - {LOG_GRAD_NORM}  # grad_norm: TensorBoard only
    entry = {LOG_STEP: 7, LOG_EPOCH: 1.25, "loss": 0.5, "learning_rate": 3e-5, "samples_per_second": 12.5}
    line = TRAINING_LINE.format(**entry, **{LOG_GRAD_NORM: 1.0})
    parsed = {name: float(captured(regex, line)) for name, regex in TRAINING_METRIC_REGEXES.items()}
    assert parsed == {f"train:{key}": float(value) for key, value in entry.items()}
    assert re.match(TRAINING_STEP, line) and int(captured(TRAINING_STEP, line)) == 7  # the line's start


def test_the_checkpoint_lines_are_read_back_by_their_patterns():
    writing = CHECKPOINT_WRITING_LOG % checkpoints.step_dir(Path("checkpoints"), 12).name
    assert int(captured(CHECKPOINT_WRITING, writing)) == 12
    assert float(captured(CHECKPOINT_SAVED, CHECKPOINT_SAVED_LOG % (12, 3.5))) == 3.5


def test_the_model_quality_report_holds_each_metric_at_its_json_path():
    report = model_quality_metrics({"f1": 88.5, "exact_match": 80.25})
    for path, value in ((evaluation_metric_path("f1"), 88.5), (evaluation_metric_path("exact_match"), 80.25)):
        node = report
        for key in path.split("."):
            node = node[key]
        assert node == value, path
    assert report == {"metrics": {"f1": {"value": 88.5}, "exact_match": {"value": 80.25}}}  # SageMaker's shape


def test_every_tasks_evaluation_line_is_read_back_metric_by_metric():
    for name in TASK_NAMES:
        metrics = task(name).METRICS
        values = {metric: 10.0 * index + 0.123456 for index, metric in enumerate(metrics, start=1)}
        line = evaluation_line(EVALUATION_PREFIX, values)
        read = {key: float(captured(regex, line)) for key, regex in metric_regexes(EVALUATION_PREFIX, metrics).items()}
        assert read == {f"eval:{metric}": round(value, 4) for metric, value in values.items()}, name
