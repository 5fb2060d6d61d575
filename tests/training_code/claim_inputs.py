"""The claim step's Lambda inputs that the claim tests share."""

from __future__ import annotations

# The per-run controls at their defaults (qa.parameter_rules.CONTROL_PARAMETERS), on prod's instance type.
CONTROLS = {
    "TrainingInstanceType": "ml.p4d.24xlarge",
    "PerDeviceTrainBatchSize": "auto",
    "MaxSeqLength": 384,
    "DocStride": 128,
    "WarmupRatio": "auto",
    "EvaluationStrategy": "no",
    "EvaluationSteps": 500,
    "EarlyStoppingPatience": 0,
}
