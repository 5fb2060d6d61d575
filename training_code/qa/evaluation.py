"""SQuAD v1.1 exact match and F1 of a QA model on the validation split that preprocess.py writes.

Used by train.py after training, on the GPUs that are already up: the validation features are cut into
batches of similar length once, the same batches whatever the number of processes, and process r predicts
batches r, r + N, r + 2N, ...; the main process gathers the logits and scores them. Every batch is computed
as a single process would compute it, so the scores equal a one-process evaluation's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qa.feature_files import EXAMPLES_FILE, FEATURES_FILE, read_features
from qa.metrics import squad_scores
from qa.outputs import EVALUATION_FILE, EVALUATION_LINE, PREDICTIONS_FILE, model_quality_metrics
from qa.postprocess import best_spans


@dataclass(frozen=True)
class ValidationSet:
    """The validation features (model inputs, context offsets, example ids) and the examples they came from."""

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
    """Percent exact match and F1 over the validation examples, and the predicted answer of each."""

    exact_match: float
    f1: float
    predictions: dict[str, str]

    def line(self, template: str = EVALUATION_LINE) -> str:
        """The line the training job's metric definitions parse (qa.outputs.EVALUATION_LINE, or BENCHMARK_LINE)."""
        return template.format(exact_match=self.exact_match, f1=self.f1)

    def report(self) -> dict[str, Any]:
        """evaluation.json: SageMaker's model-quality statistics shape, values at the qa.outputs JSON paths."""
        return {
            "examples": len(self.predictions),
            **model_quality_metrics(f1=round(self.f1, 4), exact_match=round(self.exact_match, 4)),
        }

    def write(self, report_dir: Path, predictions_dir: Path) -> None:
        """EVALUATION_FILE into `report_dir` (the model dir in a training job), PREDICTIONS_FILE beside it or
        elsewhere (the job's output data dir: kept out of model.tar.gz)."""
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / EVALUATION_FILE).write_text(json.dumps(self.report(), indent=2))
        predictions_dir.mkdir(parents=True, exist_ok=True)
        predictions = json.dumps(self.predictions, indent=1, ensure_ascii=False)
        (predictions_dir / PREDICTIONS_FILE).write_text(predictions, encoding="utf-8")


def score(
    validation: ValidationSet,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> Evaluation:
    """Best span per example across its windows, scored against every gold answer."""
    spans = best_spans(
        validation.examples, validation.features, start_logits, end_logits, n_best_size, max_answer_length
    )
    predictions = {example_id: span.text for example_id, span in spans.items()}
    scores = squad_scores(predictions, {e["id"]: e["answers"]["text"] for e in validation.examples})
    return Evaluation(scores["exact_match"], scores["f1"], predictions)
