"""The report, the tracker and `make runs` show each task's metrics by the names its module declares (METRICS),
in its order, the gate's (GATE_METRIC) marked: nothing there is QA's f1/exact_match by name."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tasks import TASK_NAMES, task

from reporting.local_runs import LocalRun, format_run
from reporting.record import RunRecord, hyperparameter_task, metrics_text, task_metrics
from reporting.report import write_report
from reporting.tracking import curve_keys
from tests.reporting.run_records import run_record


def values(name: str) -> dict[str, float]:
    """A score per metric of the task, each distinct."""
    return {metric: 40.0 + 7 * index for index, metric in enumerate(task(name).METRICS)}


def task_record(name: str) -> RunRecord:
    module = task(name)
    history = [{"step": 10, "epoch": 1.0, **{f"eval_{m}": v for m, v in values(name).items()}, "eval_loss": 0.5}]
    return dataclasses.replace(
        run_record(),
        task=name,
        metrics=values(name),
        log_history=history,
        parameters={**run_record().parameters, "F1Threshold": str(values(name)[module.GATE_METRIC] + 1)},
    )


@pytest.mark.parametrize("name", TASK_NAMES)
@pytest.mark.parametrize("prefix", ["", "eval:", "eval_"])
def test_a_task_s_metrics_are_read_by_name_in_its_order_and_nothing_else(name: str, prefix: str) -> None:
    reported = {prefix + metric: value for metric, value in reversed(values(name).items())} | {f"{prefix}other": 1.0}
    assert list(task_metrics(reported, name).items()) == list(values(name).items())


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_gate_metric_is_marked_once(name: str) -> None:
    text = metrics_text(values(name), name)
    assert text.count("(gate)") == 1 and f"{task(name).GATE_METRIC} " in text.split(" (gate)")[0].rsplit(", ", 1)[-1]
    assert all(metric in text for metric in task(name).METRICS)
    assert metrics_text({}, name) == "-"


def test_a_job_s_task_is_its_hyperparameter_and_a_job_without_one_trained_question_answering() -> None:
    assert hyperparameter_task({"task": '"token-classification"'}) == "token-classification"
    assert hyperparameter_task({"task": "text-classification"}) == "text-classification"
    assert hyperparameter_task({"epochs": "3"}) == "question-answering"


@pytest.mark.parametrize("name", TASK_NAMES)
def test_make_runs_and_the_report_name_the_task_s_metrics(tmp_path, name: str) -> None:
    record = task_record(name)
    listed = format_run(LocalRun(tmp_path / record.execution_id, record, None))
    assert f"  {name}: {metrics_text(values(name), name)}" in listed
    page = write_report(record, tmp_path).read_text()
    assert f"task: {name}; metrics: {metrics_text(values(name), name)}" in page
    assert f"F1 threshold (on {task(name).GATE_METRIC})" in page


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_tracker_s_curves_are_the_task_s_evaluations(name: str) -> None:
    keys = curve_keys(name)
    assert {f"eval_{metric}" for metric in task(name).METRICS} <= set(keys)
    others = {f"eval_{metric}" for other in TASK_NAMES if other != name for metric in task(other).METRICS}
    assert not (others - {f"eval_{metric}" for metric in task(name).METRICS}) & set(keys)


def test_a_record_written_before_tasks_reads_as_question_answering() -> None:
    written = json.loads(task_record(TASK_NAMES[1]).to_json())
    del written["task"]
    assert RunRecord.from_json(json.dumps(written)).task == "question-answering"
