"""Run a fine-tuned QA model over feature windows: question answering's predict (tasks/question_answering.py, which
inference.py serves), as the training job's evaluation scores them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tasks.question_answering import feature_output

from qa.batching import DynamicPaddingCollator, model_outputs
from qa.features import model_max_length, prepare_validation_features
from qa.postprocess import Span, best_spans, padded_logits


def answer_questions(
    model: torch.nn.Module,
    tokenizer: Any,
    questions: list[dict[str, str]],
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_answer_length: int = 30,
    batch_size: int = 32,
) -> list[Span]:
    """The best span of each {"question", "context"} pair, windows and all, as evaluation scores them. Windows are
    capped at what the model's position embeddings hold, their overlap at a third of that."""
    max_seq_length = min(max_seq_length, model_max_length(tokenizer, model.config) or max_seq_length)
    doc_stride = min(doc_stride, max_seq_length // 3)
    records = [{"id": str(i), **question} for i, question in enumerate(questions)]
    columns = {name: [record[name] for record in records] for name in ("id", "question", "context")}
    encoded = prepare_validation_features(columns, tokenizer, max_seq_length, doc_stride)
    features = [dict(zip(encoded, values, strict=True)) for values in zip(*encoded.values(), strict=True)]
    batches = [range(offset, min(offset + batch_size, len(features))) for offset in range(0, len(features), batch_size)]
    device = next(model.parameters()).device
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer)
    outputs = model_outputs(model, collator, features, batches, device, feature_output)
    starts, ends = padded_logits([output for _, output in sorted(outputs, key=lambda pair: pair[0])])
    spans = best_spans(records, features, starts, ends, max_answer_length=max_answer_length)
    return [spans[record["id"]] for record in records]


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

    def answer(self, questions: list[dict[str, str]], **parameters: Any) -> list[Span]:
        """answer_questions with this model."""
        return answer_questions(self.model, self.tokenizer, questions, **parameters)
