"""A task's metrics of a fine-tuned model on the validation split that preprocess.py writes.

Used by train.py after training, on the GPUs that are already up: the validation features are cut into
batches of similar length once, the same batches whatever the number of processes, and process r predicts
batches r, r + N, r + 2N, ...; the main process gathers each feature's output (the task's feature_output) and the
task scores them (its score: post-processing, metrics and loss). Every batch is computed as a single process would
compute it, so the scores, and the evaluation loss computed from the same outputs, equal a one-process evaluation's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from qa.feature_files import EXAMPLES_FILE, FEATURES_FILE, read_features
from qa.outputs import EVALUATION_FILE, EVALUATION_PREFIX, PREDICTIONS_FILE, evaluation_line, model_quality_metrics


@dataclass(frozen=True)
class ValidationSet:
    """The validation features (model inputs, the task's columns, example ids) and the examples they came from."""

    features: list[dict[str, Any]]
    examples: list[dict[str, Any]]

    @classmethod
    def load(cls, directory: Path) -> ValidationSet:
        missing = [name for name in (FEATURES_FILE, EXAMPLES_FILE) if not (directory / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"validation channel {directory} has no {' and no '.join(missing)}: give it the validation "
                "output of preprocess.py"
            )
        columns = read_features(directory)
        features = [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
        with (directory / EXAMPLES_FILE).open(encoding="utf-8") as handle:
            examples = [json.loads(line) for line in handle if line.strip()]
        if not features or not examples:
            raise ValueError(f"validation channel {directory} holds no features or no examples: nothing to score")
        return cls(features, examples)

    @property
    def longest(self) -> int:
        return max(len(feature["input_ids"]) for feature in self.features)


def length_sorted_batches(features: Sequence[dict[str, Any]], batch_size: int) -> list[list[int]]:
    """Feature indices, longest first (ties in file order), in batches of `batch_size`: little padding."""
    order = sorted(range(len(features)), key=lambda index: -len(features[index]["input_ids"]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


@dataclass(frozen=True)
class Evaluation:
    """The task's metrics (percent, in its METRICS order) over the validation examples, the prediction of each, and
    the evaluation loss (NaN where not computed)."""

    metrics: dict[str, float]
    predictions: dict[str, Any]
    loss: float = float("nan")

    def line(self, prefix: str = EVALUATION_PREFIX) -> str:
        """The line the training job's metric definitions parse (qa.outputs.evaluation_line)."""
        return evaluation_line(prefix, self.metrics)

    def report(self) -> dict[str, Any]:
        """evaluation.json: SageMaker's model-quality statistics shape (qa.outputs.model_quality_metrics)."""
        rounded = {name: round(value, 4) for name, value in self.metrics.items()}
        return {"examples": len(self.predictions), **model_quality_metrics(rounded)}

    def write(self, report_dir: Path, predictions_dir: Path) -> None:
        """EVALUATION_FILE into `report_dir` (the model dir in a training job), PREDICTIONS_FILE beside it or
        elsewhere (the job's output data dir: kept out of model.tar.gz)."""
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / EVALUATION_FILE).write_text(json.dumps(self.report(), indent=2))
        predictions_dir.mkdir(parents=True, exist_ok=True)
        predictions = json.dumps(self.predictions, indent=1, ensure_ascii=False)
        (predictions_dir / PREDICTIONS_FILE).write_text(predictions, encoding="utf-8")


def score(
    task: ModuleType, validation: ValidationSet, outputs: Sequence[Any], label_names: tuple[str, ...] | None
) -> Evaluation:
    """The task's metrics, predictions and loss from `outputs[i]`, feature i's output (the task's feature_output)."""
    metrics, predictions, loss = task.score(validation.examples, validation.features, list(outputs), label_names)
    return Evaluation(metrics, predictions, loss)
