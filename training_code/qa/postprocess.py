"""Map start/end logits of overlapping windows back to answer text (n-best search per example)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np


def postprocess_predictions(
    examples: Sequence[dict[str, Any]],
    features: Sequence[dict[str, Any]],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> dict[str, str]:
    """Example id -> best answer span text across all of its windows.

    `features[i]` holds `example_id` and `offset_mapping` (None for non-context tokens); rows of the logit
    arrays line up with `features` and may be padded beyond each feature's length.
    """
    features_by_example: dict[str, list[int]] = defaultdict(list)
    for index, feature in enumerate(features):
        features_by_example[feature["example_id"]].append(index)
    predictions = {}
    for example in examples:
        context = example["context"]
        best_score, best_text = None, ""
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
                    if best_score is None or score > best_score:
                        best_score = score
                        best_text = context[offsets[start][0] : offsets[end][1]]
        predictions[example["id"]] = best_text
    return predictions
