"""Run a fine-tuned QA model over feature windows: shared by evaluate.py (batch scoring) and inference.py
(the endpoint's entry point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from qa.features import MODEL_INPUTS, model_max_length, prepare_validation_features
from qa.postprocess import Span, best_spans
from qa.training import DynamicPaddingCollator


class QuestionAnswerer:
    """A model and its tokenizer on one device, saved by train.py (`save_pretrained`) into `model_dir`."""

    def __init__(self, model_dir: Path | str, device: str) -> None:
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForQuestionAnswering.from_pretrained(str(model_dir)).to(device).eval()
        self.collator = DynamicPaddingCollator.for_tokenizer(self.tokenizer)

    def logits(self, features: list[dict[str, Any]], batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits per feature, aligned with its tokens (padded with -1e4 beyond its length)."""
        longest = max(len(f["input_ids"]) for f in features)
        starts = np.full((len(features), longest), -1e4, dtype=np.float32)
        ends = np.full_like(starts, -1e4)
        with torch.inference_mode():
            for offset in range(0, len(features), batch_size):
                chunk = features[offset : offset + batch_size]
                batch = self.collator([{k: f[k] for k in MODEL_INPUTS if k in f} for f in chunk])
                out = self.model(**{k: v.to(self.device) for k, v in batch.items()})
                chunk_starts = out.start_logits.float().cpu().numpy()
                chunk_ends = out.end_logits.float().cpu().numpy()
                for row, feature in enumerate(chunk):
                    length = len(feature["input_ids"])
                    tokens = self.collator.tokens(length, chunk_starts.shape[1])
                    starts[offset + row, :length] = chunk_starts[row, tokens]
                    ends[offset + row, :length] = chunk_ends[row, tokens]
        return starts, ends

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
