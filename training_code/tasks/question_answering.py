"""Extractive question answering (SQuAD v1.1 records): the task contract bound to the `qa` package's code.

Records: `id` (a unique non-empty string), `title` (optional), `context`, `question`, `answers` ({"text": [...],
"answer_start": [...]}, character offsets into the context); also SQuAD v1.1 JSON documents (.json). Features:
overlapping windows of max_seq_length tokens, doc_stride apart, labelled with the first answer's tokens
(qa/features.py). The head is AutoModelForQuestionAnswering's; evaluation takes the best span of an example's
windows (qa/postprocess.py) and scores SQuAD v1.1 exact match and F1 (qa/metrics.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qa.data import Problem

NAME = "question-answering"
RESOURCE_NAME = "qa"  # the model package group <prefix>-qa-models, as before tasks existed
# Its part of the pipeline stack's other names (<prefix><infix>-pipeline, -notifications, ...) and of its dataset root
# datasets<infix>/: none, so the deployments made before tasks existed keep their names.
RESOURCE_INFIX = ""
PURPOSE = "extractive QA (SQuAD)"  # what the model package group's description says the models are for
METRICS = ("exact_match", "f1")  # SQuAD v1.1's, percent
GATE_METRIC = "f1"
LABEL_COLUMNS = ("start_positions", "end_positions")
USES_LABEL_NAMES = False
SAMPLE_DATASET = "sample-squad"
RECORD_COLUMNS = ("id", "context", "question", "answers")  # the columns a Parquet, CSV or Arrow file must have
JSON_COLUMNS = ("answers",)  # CSV cells that hold JSON
AUTO_MODEL = "AutoModelForQuestionAnswering"  # the transformers class the endpoint loads the model with
PARAMETERS = ("max_seq_length", "doc_stride", "max_answer_length")  # what a request's "parameters" may set


# ------------------------------------------------------------------------------------------------ records


def validate_record(record: Any, file: str, location: str, label_names: tuple[str, ...] | None) -> list[Problem]:
    """Every problem of one flattened SQuAD record (qa.data.validate_squad_record)."""
    from qa.data import validate_squad_record

    return validate_squad_record(record, file, location)


def label_names_problems(label_names: tuple[str, ...] | None, file: str) -> list[Problem]:
    """Question answering has no labels: a manifest's label_names are refused rather than ignored."""
    from qa.data import Problem

    if label_names is None:
        return []
    return [Problem(file, "", None, "label_names", f"{NAME} has no labels", "remove label_names from the manifest")]


def normalized(record: dict[str, Any], label_names: tuple[str, ...] | None, record_id: str) -> dict[str, Any]:
    """A valid record in the flattened SQuAD schema (its own id: validate_record requires one)."""
    from qa.data import normalized_squad_record

    return normalized_squad_record(record)


def json_document_records(document: Any, file: str, problems: list[Problem]) -> Any:
    """(location, record) of each question of a SQuAD v1.1 JSON document (a .json file)."""
    from qa.data import flatten_squad_json

    return flatten_squad_json(document, file, problems)


def estimated_tokens(record: dict[str, Any]) -> int:
    """Whole words of the question and the context (qa.claim_validation.certain_tokens)."""
    from qa.claim_validation import certain_tokens

    return certain_tokens(record["question"]) + certain_tokens(record["context"])


def claim_features(max_seq_length: int, doc_stride: int) -> Callable[[dict[str, Any]], tuple[int, list[int]]]:
    """The claim's per-record estimate (qa.claim_validation): (windows at least, estimated window lengths). A
    paragraph's questions share one context object (SQuAD JSON): its words are counted once."""
    from qa.claim_validation import (
        WORDPIECES_PER_CONTEXT_WORD,
        WORDPIECES_PER_QUESTION_WORD,
        certain_tokens,
        feature_lengths,
        windows,
    )
    from qa.claim_validation import estimated_tokens as estimated

    last: list[Any] = [None, 0, 0]

    def estimate(record: dict[str, Any]) -> tuple[int, list[int]]:
        question, context = record["question"].lstrip(), record["context"]
        if context is not last[0]:
            last[:] = [context, certain_tokens(context), estimated(context, WORDPIECES_PER_CONTEXT_WORD)]
        lower = windows(certain_tokens(question), last[1], max_seq_length, doc_stride)
        lengths = feature_lengths(
            estimated(question, WORDPIECES_PER_QUESTION_WORD), last[2], max_seq_length, doc_stride
        )
        return lower, lengths

    return estimate


# ------------------------------------------------------------------------------------------------ features


def _columns(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {name: [record[name] for record in records] for name in ("id", "question", "context", "answers")}


def train_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """Windows with the first answer's start and end token (qa.features.prepare_train_features)."""
    from qa.features import prepare_train_features

    return prepare_train_features(_columns(records), tokenizer, max_seq_length, doc_stride)


def validation_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """Windows with their context offsets and example ids (qa.features.prepare_validation_features)."""
    from qa.features import prepare_validation_features

    return prepare_validation_features(_columns(records), tokenizer, max_seq_length, doc_stride)


# ------------------------------------------------------------------------------------------------ model


def load_model(name_or_path: str, label_names: tuple[str, ...] | None, log: logging.Logger) -> Any:
    """AutoModelForQuestionAnswering in float32, the new head said in one line (qa.base_model)."""
    from qa.base_model import load_question_answering_model

    return load_question_answering_model(name_or_path, log)


# ------------------------------------------------------------------------------------------------ evaluation


def feature_output(model_output: Mapping[str, Any], row: int, tokens: slice) -> Any:
    """The start and end logits of one feature's tokens, as a (2, tokens) array."""
    import numpy as np

    return np.stack([model_output["start_logits"][row][tokens], model_output["end_logits"][row][tokens]])


def score(
    examples: list[dict[str, Any]],
    features: list[dict[str, Any]],
    outputs: list[Any],
    label_names: tuple[str, ...] | None,
) -> tuple[dict[str, float], dict[str, Any], float]:
    """SQuAD exact match and F1 of each example's best span across its windows, the answer text by example id, and
    the loss the head trains on (qa.postprocess.question_answering_loss)."""
    from qa.metrics import squad_scores
    from qa.postprocess import answer_positions, best_spans, padded_logits, question_answering_loss

    starts, ends = padded_logits(outputs)
    spans = best_spans(examples, features, starts, ends)
    predictions = {example_id: span.text for example_id, span in spans.items()}
    metrics = squad_scores(predictions, {e["id"]: e["answers"]["text"] for e in examples})
    loss = question_answering_loss(starts, ends, answer_positions(examples, features))
    return {name: metrics[name] for name in METRICS}, predictions, loss


def response_scores(
    records: list[dict[str, Any]], responses: list[Any], label_names: tuple[str, ...] | None
) -> dict[str, float]:
    """SQuAD exact match and F1 of the endpoint's answers (predict's, to each record's example_request)."""
    from qa.metrics import squad_scores

    predictions = {record["id"]: response["answer"] for record, response in zip(records, responses, strict=True)}
    metrics = squad_scores(predictions, {record["id"]: record["answers"]["text"] for record in records})
    return {name: metrics[name] for name in METRICS}


# ------------------------------------------------------------------------------------------------ serving


def predict(model: Any, tokenizer: Any, inputs: list[Any], parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """Per {"question", "context"} input, {"answer", "score", "start", "end"} (character offsets into the context,
    score the span's probability), as transformers' former question-answering pipeline answered."""
    from qa.answering import answer_questions

    if not all(
        isinstance(q, dict) and isinstance(q.get("question"), str) and isinstance(q.get("context"), str) for q in inputs
    ):
        raise ValueError('expected {"inputs": {"question": "<text>", "context": "<text>"}} or a list of such objects')
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; supported: {', '.join(PARAMETERS)}")
    return [
        {"answer": span.text, "score": span.score, "start": span.start, "end": span.end}
        for span in answer_questions(model, tokenizer, inputs, **parameters)
    ]


def example_request(record: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's request for a validation record (inference.py: one {"question", "context"})."""
    return {"inputs": {"question": record["question"], "context": record["context"]}}


def describe_response(
    response: dict[str, Any], record: dict[str, Any], label_names: tuple[str, ...] | None = None
) -> str:
    """The demo's last lines: the record's question, then the registered model's answer beside the reference."""
    return (
        f"question ({record['id']}, validation set): {record['question']}\n"
        f'answer of the registered model: "{response["answer"]}" (score {response["score"]:.2f}; '
        f'reference: "{record["answers"]["text"][0]}")'
    )
