"""SQuAD v1.1 exact match and F1 of a QA model on the validation split that preprocess.py writes.

Used by train.py after training, on the GPUs that are already up: the validation features are cut into
batches of similar length once, the same batches whatever the number of processes, and process r predicts
batches r, r + N, r + 2N, ...; the main process gathers the logits and scores them. Every batch is computed
as a single process would compute it, so the scores equal a one-process evaluation's. The evaluation loss is
computed from the same gathered logits, so it too equals a one-process evaluation's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
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

    @cached_property
    def answer_positions(self) -> np.ndarray:
        """(start, end) token of each feature's first gold answer, labelled as qa.features labels training windows:
        the context tokens that hold the answer's first and last characters, or (0, 0) (the [CLS]/<s> token, first
        in BERT and RoBERTa inputs) when the answer is not wholly inside the window."""
        answers = {e["id"]: e["answers"] for e in self.examples}
        positions = np.zeros((len(self.features), 2), dtype=np.int64)
        for row, feature in enumerate(self.features):
            gold = answers[feature["example_id"]]
            start_char = gold["answer_start"][0]
            end_char = start_char + len(gold["text"][0])
            context = [(k, offset) for k, offset in enumerate(feature["offset_mapping"]) if offset is not None]
            if not context or not (context[0][1][0] <= start_char and context[-1][1][1] >= end_char):
                continue
            start = max(k for k, offset in context if offset[0] <= start_char)
            end = min(k for k, offset in context if offset[1] >= end_char)
            positions[row] = (start, end)
        return positions


def length_sorted_batches(features: Sequence[dict[str, Any]], batch_size: int) -> list[list[int]]:
    """Feature indices, longest first (ties in file order), in batches of `batch_size`: little padding."""
    order = sorted(range(len(features)), key=lambda index: -len(features[index]["input_ids"]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


@dataclass(frozen=True)
class Evaluation:
    """Percent exact match and F1 over the validation examples, the predicted answer of each, and the evaluation
    loss (NaN where not computed)."""

    exact_match: float
    f1: float
    predictions: dict[str, str]
    loss: float = float("nan")

    def line(self, template: str = EVALUATION_LINE) -> str:
        """The line the training job's metric definitions parse (qa.outputs.EVALUATION_LINE, or BENCHMARK_LINE)."""
        return template.format(exact_match=self.exact_match, f1=self.f1)

    def report(self) -> dict[str, Any]:
        """evaluation.json: SageMaker's model-quality statistics shape, values at the qa.outputs JSON paths."""
        return {
            "examples": len(self.predictions),
            **model_quality_metrics({"f1": round(self.f1, 4), "exact_match": round(self.exact_match, 4)}),
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
    loss = question_answering_loss(start_logits, end_logits, validation.answer_positions)
    return Evaluation(scores["exact_match"], scores["f1"], predictions, loss)


def question_answering_loss(start_logits: np.ndarray, end_logits: np.ndarray, positions: np.ndarray) -> float:
    """The loss transformers' question-answering heads train on, over all features: the mean of the start and end
    tokens' cross-entropy. Logit rows padded beyond a feature with qa.answering.PADDING_LOGIT add nothing."""

    def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        logits = logits.astype(np.float64)
        peak = logits.max(axis=1, keepdims=True)
        log_total = np.log(np.exp(logits - peak).sum(axis=1)) + peak[:, 0]
        return log_total - logits[np.arange(len(targets)), targets]

    starts, ends = cross_entropy(start_logits, positions[:, 0]), cross_entropy(end_logits, positions[:, 1])
    return float(np.mean((starts + ends) / 2))
