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
