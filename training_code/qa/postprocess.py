"""Map start/end logits of overlapping windows back to answer text (n-best search per example)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Span:
    """The best answer of one example: its text, character offsets in the context, and probability (the
    window's start and end softmax over context tokens, multiplied)."""

    text: str
    start: int
    end: int
    score: float


def _softmax_over_context(logits: np.ndarray, offsets: Sequence[Any]) -> np.ndarray:
    context = np.array([offset is not None for offset in offsets])
    if not context.any():
        return np.zeros_like(logits, dtype=np.float64)
    shifted = np.where(context, logits - logits[context].max(), -np.inf)
    weights = np.exp(shifted)
    return weights / weights.sum()


def best_spans(
    examples: Sequence[dict[str, Any]],
    features: Sequence[dict[str, Any]],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> dict[str, Span]:
    """Example id -> best answer span across all of its windows (empty text when no window has one).

    `features[i]` holds `example_id` and `offset_mapping` (None for non-context tokens); rows of the logit
    arrays line up with `features` and may be padded beyond each feature's length.
    """
    features_by_example: dict[str, list[int]] = defaultdict(list)
    for index, feature in enumerate(features):
        features_by_example[feature["example_id"]].append(index)
    spans = {}
    for example in examples:
        context = example["context"]
        best: tuple[float, int, int, int] | None = None  # score, feature, start token, end token
        for feature_index in features_by_example.get(example["id"], []):
            offsets = features[feature_index]["offset_mapping"]
            starts = start_logits[feature_index][: len(offsets)]
            ends = end_logits[feature_index][: len(offsets)]
            start_candidates = np.argsort(starts)[-1 : -n_best_size - 1 : -1]
            end_candidates = np.argsort(ends)[-1 : -n_best_size - 1 : -1]
            for start in start_candidates:
                if offsets[start] is None:
                    continue
                for end in end_candidates:
                    if offsets[end] is None or end < start or end - start + 1 > max_answer_length:
                        continue
                    score = float(starts[start] + ends[end])
                    if best is None or score > best[0]:
                        best = (score, feature_index, int(start), int(end))
        if best is None:
            spans[example["id"]] = Span("", 0, 0, 0.0)
            continue
        _, feature_index, start, end = best
        offsets = features[feature_index]["offset_mapping"]
        probability = (
            _softmax_over_context(start_logits[feature_index][: len(offsets)], offsets)[start]
            * _softmax_over_context(end_logits[feature_index][: len(offsets)], offsets)[end]
        )
        first, last = offsets[start][0], offsets[end][1]
        spans[example["id"]] = Span(context[first:last], first, last, float(probability))
    return spans


# Logit rows are padded beyond each feature's length with this: never a best start or end.
PADDING_LOGIT = -1e4


def padded_logits(outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits, row i for feature i, from each feature's (2, its tokens) array (the task's
    feature_output), padded with PADDING_LOGIT to the longest."""
    longest = max((output.shape[1] for output in outputs), default=0)
    starts = np.full((len(outputs), longest), PADDING_LOGIT, dtype=np.float32)
    ends = np.full_like(starts, PADDING_LOGIT)
    for index, output in enumerate(outputs):
        starts[index, : output.shape[1]] = output[0]
        ends[index, : output.shape[1]] = output[1]
    return starts, ends


def answer_positions(examples: Sequence[dict[str, Any]], features: Sequence[dict[str, Any]]) -> np.ndarray:
    """(start, end) token of each feature's first gold answer, labelled as qa.features labels training windows: the
    context tokens that hold the answer's first and last characters, or (0, 0) (the [CLS]/<s> token, first in BERT
    and RoBERTa inputs) when the answer is not wholly inside the window."""
    answers = {e["id"]: e["answers"] for e in examples}
    positions = np.zeros((len(features), 2), dtype=np.int64)
    for row, feature in enumerate(features):
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


def question_answering_loss(start_logits: np.ndarray, end_logits: np.ndarray, positions: np.ndarray) -> float:
    """The loss transformers' question-answering heads train on, over all features: the mean of the start and end
    tokens' cross-entropy. Logit rows padded beyond a feature with PADDING_LOGIT add nothing."""

    def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        logits = logits.astype(np.float64)
        peak = logits.max(axis=1, keepdims=True)
        log_total = np.log(np.exp(logits - peak).sum(axis=1)) + peak[:, 0]
        return log_total - logits[np.arange(len(targets)), targets]

    starts, ends = cross_entropy(start_logits, positions[:, 0]), cross_entropy(end_logits, positions[:, 1])
    return float(np.mean((starts + ends) / 2))
