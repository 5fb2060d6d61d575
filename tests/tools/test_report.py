"""The run report: its record (local and AWS), the self-contained HTML and its figure.

The AWS execution is stubbed with botocore's Stubber (which validates every request and response against the
SageMaker and S3 models): moto has no ListPipelineExecutionSteps and its executions succeed at once, so it
cannot hold step metadata, attempts, training metrics or billable time. The command's error line for an
execution that does not exist runs against a pipeline in moto server (tests/tools/moto_pipeline.py).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re
from dataclasses import replace
from datetime import timedelta

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from PIL import Image

from config.costs import PROCESSING_USD_PER_HOUR, TRAINING_USD_PER_HOUR
from reporting.record import REPORT_FILE, REPORT_IMAGE, RunRecord, load_local, read_log_history, record_from_aws, save
from reporting.report import draw, failure_line, render_html, render_png, write_report
from tests.reporting.run_records import START, log_history, model_archive, run_record
from tests.tools.conftest import assert_one_line_error, run_cli

PIPELINE = "hfqa-dev-qa-fine-tuning"
ARN = f"arn:aws:sagemaker:us-east-1:111122223333:pipeline/{PIPELINE}/execution/abc123"
JOB_ARN = "arn:aws:sagemaker:us-east-1:111122223333"
ARCHIVE = "s3://artifacts/models/pipelines-abc123-FineTune/output/model.tar.gz"
MANIFEST_SHA256 = "5" * 64


def test_log_history_is_read_from_the_model_archive():
    history = log_history()
    assert read_log_history(io.BytesIO(model_archive(history))) == history


def test_an_archive_without_log_history_gives_no_curves(tmp_path):
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(tarfile.TarInfo("model.safetensors"), io.BytesIO(b""))
    buffer.seek(0)
    assert read_log_history(buffer) == []


def test_a_local_record_round_trips_through_its_file(tmp_path):
    record = run_record()
    save(record, tmp_path)
    assert load_local(tmp_path) == record


def test_the_cost_is_each_job_at_its_list_price():
    record = run_record()
    expected = (
        PROCESSING_USD_PER_HOUR["ml.m5.4xlarge"] * 190 / 3600
        + TRAINING_USD_PER_HOUR["ml.p4d.24xlarge"] * 2 * 1500 / 3600
    )
    assert record.list_price_usd == pytest.approx(expected)


def test_the_html_is_self_contained_and_holds_every_section(tmp_path):
    record = run_record()
    path = write_report(record, tmp_path)
    text = path.read_text()
    assert path.name == REPORT_FILE and (tmp_path / REPORT_IMAGE).is_file()
    assert not re.search(r"""(src|href)=['"](?!data:)""", text), "the report links an external file"
    assert "<script" not in text
    [inline] = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert base64.b64decode(inline) == (tmp_path / REPORT_IMAGE).read_bytes()
    for step in record.steps:
        assert f"<td>{step.name}</td>" in text
    for fact in (str(record.model_package_arn), "PendingManualApproval", record.parameters["ManifestKey"], "$31."):
        assert fact in text
    assert "<td>2</td>" in text  # FineTune's two attempts


def _pixels(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _count(image: Image.Image, colour: tuple[int, int, int]) -> int:
    return list(image.getdata()).count(colour)


def test_the_figure_colours_an_f1_below_the_threshold_red():
    red, green = (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)
    passing = _pixels(render_png(run_record(f1=90.5, threshold=88)))
    failing = _pixels(render_png(run_record(f1=80.0, threshold=88)))
    assert passing.size == failing.size == (1200, 750)
    # Red appears in the passing figure only as the dashed threshold line; the failing bar adds a block of it.
    assert _count(failing, red) > _count(passing, red) + 8000
    assert _count(passing, green) > 5000


def test_a_run_without_log_history_says_where_curves_come_from():
    record = run_record()
    record.log_history = []
    text = render_html(record, render_png(record))
    assert "data:image/png" in text  # the figure still renders, with the panels' explanation


def _stubbed_aws_execution(f1: float = 91.2) -> tuple[RunRecord, Stubber, Stubber]:
    sagemaker, s3 = boto3.client("sagemaker", region_name="us-east-1"), boto3.client("s3", region_name="us-east-1")
    sm, objects = Stubber(sagemaker), Stubber(s3)
    sm.add_response(
        "describe_pipeline_execution",
        {"PipelineExecutionArn": ARN, "PipelineExecutionStatus": "Succeeded", "CreationTime": START},
        {"PipelineExecutionArn": ARN},
    )
    sm.add_response(
        "list_pipeline_parameters_for_execution",
        {
            "PipelineParameters": [
                {"Name": "ManifestKey", "Value": "datasets/squad/v1/manifest.json"},
                {"Name": "F1Threshold", "Value": "88"},
            ]
        },
        {"PipelineExecutionArn": ARN},
    )

    def at(minutes: float):
        return START + timedelta(minutes=minutes)

    claimed = [{"Name": "Duplicate", "Value": "no"}, {"Name": "ManifestSha256", "Value": MANIFEST_SHA256}]

    steps = [
        ("ClaimManifest", 0, 0.1, {"Lambda": {"Arn": f"{JOB_ARN}:function:claim", "OutputParameters": claimed}}, 1),
        ("ValidateAndTokenize", 0.2, 3.5, {"ProcessingJob": {"Arn": f"{JOB_ARN}:processing-job/prep"}}, 1),
        ("FineTune", 3.6, 30, {"TrainingJob": {"Arn": f"{JOB_ARN}:training-job/train"}}, 2),
        ("CheckF1", 30.1, 30.1, {"Condition": {"Outcome": "True"}}, 1),
        ("RegisterModel", 30.2, 30.3, {"RegisterModel": {"Arn": f"{JOB_ARN}:model-package/g/7"}}, 1),
    ]
    sm.add_response(
        "list_pipeline_execution_steps",
        {
            "PipelineExecutionSteps": [
                {
                    "StepName": name,
                    "StepStatus": "Succeeded",
                    "StartTime": at(start),
                    "EndTime": at(end),
                    "Metadata": metadata,
                    "AttemptCount": attempts,
                }
                for name, start, end, metadata, attempts in steps
            ]
        },
        {"PipelineExecutionArn": ARN, "SortOrder": "Ascending"},
    )
    sm.add_response(
        "describe_processing_job",
        {
            "ProcessingJobName": "prep",
            "ProcessingJobArn": f"{JOB_ARN}:processing-job/prep",
            "ProcessingResources": {
                "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.4xlarge", "VolumeSizeInGB": 50}
            },
            "AppSpecification": {"ImageUri": "image"},
            "CreationTime": START,
            "ProcessingStartTime": at(0.5),
            "ProcessingEndTime": at(3.5),
            "ProcessingJobStatus": "Completed",
        },
        {"ProcessingJobName": "prep"},
    )
    sm.add_response(
        "describe_training_job",
        {
            "TrainingJobName": "train",
            "TrainingJobArn": f"{JOB_ARN}:training-job/train",
            "ModelArtifacts": {"S3ModelArtifacts": ARCHIVE},
            "TrainingJobStatus": "Completed",
            "SecondaryStatus": "Completed",
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 200},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "CreationTime": START,
            "EnableManagedSpotTraining": True,
            "BillableTimeInSeconds": 900,
            "FinalMetricDataList": [
                {"MetricName": "eval:f1", "Value": f1, "Timestamp": at(29)},
                {"MetricName": "eval:exact_match", "Value": 84.5, "Timestamp": at(29)},
            ],
        },
        {"TrainingJobName": "train"},
    )
    archive = model_archive(log_history(f1=f1))
    objects.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(archive), len(archive))},
        {"Bucket": "artifacts", "Key": ARCHIVE.removeprefix("s3://artifacts/")},
    )
    sm.add_response(
        "describe_model_package",
        {
            "ModelPackageName": "g",
            "ModelPackageArn": f"{JOB_ARN}:model-package/g/7",
            "CreationTime": START,
            "ModelPackageStatus": "Completed",
            "ModelPackageStatusDetails": {"ValidationStatuses": []},
            "ModelApprovalStatus": "Approved",
        },
        {"ModelPackageName": f"{JOB_ARN}:model-package/g/7"},
    )
    with sm, objects:
        record = record_from_aws(sagemaker, s3, ARN)
    return record, sm, objects


def test_an_aws_execution_gives_the_same_record_as_a_local_run():
    record, sm, objects = _stubbed_aws_execution(f1=91.2)
    sm.assert_no_pending_responses()
    objects.assert_no_pending_responses()
    assert (record.source, record.status, record.execution_id, record.pipeline_name) == (
        "aws",
        "Succeeded",
        "abc123",
        PIPELINE,
    )
    assert record.metrics == {"f1": 91.2, "exact_match": 84.5}
    assert record.f1_threshold == 88
    assert record.log_history == log_history(f1=91.2)
    assert record.dataset_sha256 == MANIFEST_SHA256, "ClaimManifest's output, the dataset's digest in MLflow"
    assert [s.name for s in record.steps] == [
        "ClaimManifest",
        "ValidateAndTokenize",
        "FineTune",
        "CheckF1",
        "RegisterModel",
    ]
    assert [s.attempts for s in record.steps if s.name == "FineTune"] == [2]
    assert record.steps[3].detail == "-> True"
    assert (record.model_package_arn, record.approval_status) == (f"{JOB_ARN}:model-package/g/7", "Approved")
    expected = (
        TRAINING_USD_PER_HOUR["ml.p4d.24xlarge"] * 2 * 900 / 3600
        + PROCESSING_USD_PER_HOUR["ml.m5.4xlarge"] * 180 / 3600
    )
    assert record.list_price_usd == pytest.approx(expected)
    assert "FineTune" in render_html(record, render_png(record))


def test_make_report_on_a_local_run_writes_the_report_and_records_it_once(tmp_path):
    executions = tmp_path / "executions"
    record = run_record()
    save(record, executions / record.execution_id)
    args = ("--execution", record.execution_id, "--work-dir", str(executions))
    first = run_cli("tools.report", *args, env={}, timeout=180)
    assert first.returncode == 0, first.stderr
    assert (executions / record.execution_id / REPORT_FILE).is_file()
    assert "mlflow: recorded local-0123456789ab as run" in first.stdout
    assert (tmp_path / "mlflow.db").is_file()
    again = run_cli("tools.report", *args, env={}, timeout=180)
    assert "already recorded" in again.stdout, again.stdout


def test_make_report_without_execution_reports_the_newest_local_run_even_a_stopped_one(tmp_path):
    executions = tmp_path / "executions"
    older = run_record()
    save(older, executions / older.execution_id)
    stopped_at = (START + timedelta(hours=1)).isoformat()
    stopped = dataclasses.replace(
        run_record(status="Stopped"), execution_id="local-00000000000b", started_at=stopped_at
    )
    save(stopped, executions / stopped.execution_id)
    result = run_cli("tools.report", "--work-dir", str(executions), "--no-tracking", env={}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert f"{stopped.execution_id}/{REPORT_FILE}" in result.stdout
    assert "local-00000000000b (local): Stopped" in (executions / stopped.execution_id / REPORT_FILE).read_text()
    assert not (executions / older.execution_id / REPORT_FILE).exists()


def test_make_report_of_a_run_folder_without_a_record_says_what_is_known(tmp_path):
    """A folder whose runner was killed before it wrote execution.json (runs since this change write it as they
    start): the report names the run and why nothing more is known."""
    executions = tmp_path / "executions"
    (executions / "local-00000000000c" / "FineTune").mkdir(parents=True)
    args = ("--execution", "local-00000000000c", "--work-dir", str(executions), "--no-tracking")
    result = run_cli("tools.report", *args, env={}, timeout=180)
    assert result.returncode == 0, result.stderr
    html = (executions / "local-00000000000c" / REPORT_FILE).read_text()
    assert "local-00000000000c (local): Unrecorded" in html and "holds no execution.json" in html


def test_make_report_without_a_local_run_is_one_line(tmp_path):
    result = run_cli("tools.report", "--work-dir", str(tmp_path), env={})
    assert_one_line_error(result, "no local run", "make demo")


def test_make_report_of_an_unknown_execution_is_one_line(moto_pipeline, aws):
    result = run_cli("tools.report", "--execution", "nosuchid", "--env", "dev", env=aws)
    assert_one_line_error(result, "no execution 'nosuchid'", moto_pipeline.name, "make runs")


def test_the_f1_threshold_label_overlaps_no_tick_label_and_no_bar():
    from matplotlib import pyplot
    from matplotlib.text import Text

    figure = draw(run_record(f1=40.0, threshold=40))  # the threshold at a tick (40) and at the f1 bar's top
    try:
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        metrics = figure.axes[3]
        [label] = [t for t in metrics.findobj(Text) if t.get_text().startswith("F1 threshold")]
        box = label.get_window_extent(renderer)
        ticks = [t.get_window_extent(renderer) for t in (*metrics.get_yticklabels(), *metrics.get_xticklabels())]
        bars = [bar.get_window_extent(renderer) for bar in metrics.patches]
        assert ticks and bars
        assert not any(box.overlaps(other) for other in (*ticks, *bars))
        assert box.x0 >= metrics.get_window_extent(renderer).x1, "right of the plot, at the line's end"
        assert box.x1 <= figure.bbox.x1, "inside the figure"
    finally:
        pyplot.close(figure)


def test_a_failed_runs_title_says_which_step_failed_and_why():
    record = run_record(status="Failed", f1=50.0)
    record.steps[-1] = replace(record.steps[-1], name="F1BelowThreshold", type="Fail", status="Failed", detail="")
    record.failure = "Validation F1 50.0 is below the threshold 88.0 - model not registered.\n(second line)"
    expected = (
        "F1BelowThreshold failed: Validation F1 50.0 is below the threshold 88.0 - model not registered. (second line)"
    )
    assert failure_line(record) == expected
    figure = draw(record)
    try:
        assert figure.get_suptitle().splitlines()[-1] == expected
    finally:
        from matplotlib import pyplot

        pyplot.close(figure)
    assert html.escape(expected) in render_html(record, b"")
    assert failure_line(run_record()) == "", "a run that did not fail keeps a one-line title"
    record.steps[-1].detail = "x" * 400
    assert len(failure_line(record)) < 200
