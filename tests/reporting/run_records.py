"""Run records as the local runner and AWS leave them: the target step graph (GRAPH.md), a Trainer-like log
history (qa/outputs.py LOG_HISTORY_FILE contract) and a model archive holding it."""

from __future__ import annotations

import io
import json
import math
import tarfile
from datetime import UTC, datetime, timedelta
from typing import Any

from qa.outputs import EVALUATION_FILE, LOG_HISTORY_FILE

from reporting.record import JobCost, RunRecord, StepRecord

START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
# (name, type, seconds) of the target graph, in execution order.
GRAPH_STEPS = [
    ("ClaimManifest", "Lambda", 2.0),
    ("ParametersValid", "Condition", 0.0),
    ("FirstDelivery", "Condition", 0.0),
    ("ValidateAndTokenize", "Processing", 190.0),
    ("EstimateTrainingCost", "Lambda", 3.0),
    ("CheckTrainingCost", "Condition", 0.0),
    ("FineTune", "Training", 1500.0),
    ("RecordModel", "Lambda", 4.0),
    ("CheckF1", "Condition", 0.0),
    ("RegisterModel", "RegisterModel", 1.0),
]


def log_history(steps: int = 60, every: int = 5, f1: float = 90.5, exact_match: float = 83.25) -> list[dict[str, Any]]:
    """Logging entries every `every` steps (decaying loss, linear warm-up then decay) and one evaluation."""
    entries: list[dict[str, Any]] = []
    for step in range(every, steps + 1, every):
        rate = 3e-5 * min(step / 10, (steps - step) / (steps - 10))
        entries.append(
            {
                "step": step,
                "epoch": round(2 * step / steps, 3),
                "loss": round(5.5 * math.exp(-step / 15) + 0.9, 4),
                "learning_rate": rate,
                "grad_norm": 1.0 + 3 / step,
                "samples_per_second": 400.0 + step % 3 * 10,
            }
        )
    entries.append({"step": steps, "epoch": 2.0, "eval_exact_match": exact_match, "eval_f1": f1})
    return entries


def model_archive(history: list[dict[str, Any]]) -> bytes:
    """A model.tar.gz with weights first and the log history last, as train.py writes the model dir."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in [
            ("model.safetensors", b"\0" * 1024),
            (EVALUATION_FILE, b"{}"),
            (LOG_HISTORY_FILE, json.dumps(history).encode()),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_record(status: str = "Succeeded", f1: float = 90.5, threshold: float = 88.0) -> RunRecord:
    clock = START
    steps = []
    for name, kind, seconds in GRAPH_STEPS:
        detail = "-> IfSteps" if kind == "Condition" else ""
        attempts = 2 if name == "FineTune" else 1
        steps.append(StepRecord(name, kind, "Succeeded", clock.isoformat(), seconds, attempts, detail))
        clock += timedelta(seconds=seconds + 5)
    return RunRecord(
        execution_id="local-0123456789ab",
        execution_arn="arn:aws:sagemaker:local:000000000000:pipeline/hfqa-dev-qa-fine-tuning/execution/local-0123456789ab",
        pipeline_name="hfqa-dev-qa-fine-tuning",
        source="local",
        status=status,
        started_at=START.isoformat(),
        parameters={
            "ManifestKey": "datasets/sample-squad/v1/manifest.json",
            "ManifestVersionId": "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY",
            "BaseModelUri": "s3://hfqa-dev-artifacts/base-models/bert-large-uncased-whole-word-masking/",
            "F1Threshold": str(threshold),
            "Epochs": "2",
        },
        steps=steps,
        jobs=[
            JobCost("ValidateAndTokenize", "processing", "ml.m5.4xlarge", 1, 190.0),
            JobCost("FineTune", "training", "ml.p4d.24xlarge", 2, 1500.0, spot=True),
        ],
        metrics={"exact_match": 83.25, "f1": f1},
        log_history=log_history(f1=f1),
        model_package_arn="arn:aws:sagemaker:local:000000000000:model-package/hfqa-dev-qa-models/3",
        approval_status="PendingManualApproval",
        model_data="s3://hfqa-dev-artifacts/models/local-0123456789ab-FineTune/output/model.tar.gz",
    )
