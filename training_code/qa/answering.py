"""Run a fine-tuned QA model over feature windows: shared by the training job's evaluation (qa.evaluation) and
inference.py (the endpoint's entry point)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qa.batching import DynamicPaddingCollator
from qa.features import MODEL_INPUTS, model_max_length, prepare_validation_features
from qa.postprocess import Span, best_spans

# Logit rows are padded beyond each feature's length with this: never a best start or end.
PADDING_LOGIT = -1e4
WindowLogits = tuple[int, np.ndarray, np.ndarray]  # feature index, start logits, end logits (its length)


def window_logits(
    model: torch.nn.Module,
    collator: DynamicPaddingCollator,
    features: Sequence[dict[str, Any]],
    batches: Sequence[Sequence[int]],
    device: torch.device | str,
) -> list[WindowLogits]:
    """Start and end logits of the features in `batches` (lists of indices into `features`), one forward pass
    per batch in full precision (the weights as they are saved and served), each cut to its feature's tokens."""
    results = []
    with torch.inference_mode():
        for indices in batches:
            chunk = [features[index] for index in indices]
            batch = collator([{k: f[k] for k in MODEL_INPUTS if k in f} for f in chunk])
            out = model(**{k: v.to(device) for k, v in batch.items()})
            starts = out.start_logits.float().cpu().numpy()
            ends = out.end_logits.float().cpu().numpy()
            for row, (index, feature) in enumerate(zip(indices, chunk, strict=True)):
                tokens = collator.tokens(len(feature["input_ids"]), starts.shape[1])
                results.append((index, starts[row, tokens].copy(), ends[row, tokens].copy()))
    return results


def stack_logits(results: Sequence[WindowLogits], count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` rows of start and end logits, row i for feature i, padded with PADDING_LOGIT."""
    longest = max((len(starts) for _, starts, _ in results), default=0)
    starts = np.full((count, longest), PADDING_LOGIT, dtype=np.float32)
    ends = np.full_like(starts, PADDING_LOGIT)
    for index, feature_starts, feature_ends in results:
        starts[index, : len(feature_starts)] = feature_starts
        ends[index, : len(feature_ends)] = feature_ends
    return starts, ends


class QuestionAnswerer:
    """A model (in float32, as evaluation scores it) and its tokenizer on one device, saved by train.py
    (`save_pretrained`) into `model_dir`."""

    def __init__(self, model_dir: Path | str, device: str) -> None:
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        from qa.base_model import FLOAT32_WEIGHTS

        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        model = AutoModelForQuestionAnswering.from_pretrained(str(model_dir), **FLOAT32_WEIGHTS)
        self.model = model.to(device).eval()
        self.collator = DynamicPaddingCollator.for_tokenizer(self.tokenizer)

    def logits(self, features: list[dict[str, Any]], batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits per feature, aligned with its tokens (padded with PADDING_LOGIT beyond it)."""
        batches = [
            range(offset, min(offset + batch_size, len(features))) for offset in range(0, len(features), batch_size)
        ]
        return stack_logits(window_logits(self.model, self.collator, features, batches, self.device), len(features))

    def answer(
        self,
        questions: list[dict[str, str]],
        max_seq_length: int = 384,
        doc_stride: int = 128,
        max_answer_length: int = 30,
        batch_size: int = 32,
    ) -> list[Span]:
        """The best span of each {"question", "context"} pair, windows and all, as evaluation scores them.
        Windows are capped at what the model's position embeddings hold, their overlap at a third of that."""
        max_seq_length = min(max_seq_length, model_max_length(self.tokenizer, self.model.config) or max_seq_length)
        doc_stride = min(doc_stride, max_seq_length // 3)
        records = [{"id": str(i), **question} for i, question in enumerate(questions)]
        columns = {name: [record[name] for record in records] for name in ("id", "question", "context")}
        encoded = prepare_validation_features(columns, self.tokenizer, max_seq_length, doc_stride)
        features = [dict(zip(encoded, values, strict=True)) for values in zip(*encoded.values(), strict=True)]
        starts, ends = self.logits(features, batch_size)
        spans = best_spans(records, features, starts, ends, max_answer_length=max_answer_length)
        return [spans[record["id"]] for record in records]
