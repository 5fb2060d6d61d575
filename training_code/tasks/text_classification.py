"""Sequence classification of single texts or text pairs (`text`, optional `text_pair`, `label`).

Records (JSON Lines, CSV, Parquet or a save_to_disk folder): `text` (a non-empty string), optionally `text_pair`
(a non-empty string: the second text of a pair, as GLUE's MNLI or QQP have), `label` (one of the manifest's
`label_names`, or its index in them, as `datasets`' ClassLabel keeps labels) and optionally `id` (a string or an
integer; a record without one is named by its location).

Features: one per record, cut at max_seq_length (pairs `truncation="longest_first"`: the longer text loses tokens
first, both keep some); doc_stride does not apply. The head is AutoModelForSequenceClassification's, trained with
its cross-entropy; metrics are accuracy and macro-F1 over every label name (scikit-learn's `accuracy_score` and
`f1_score(average="macro", labels=<all names>, zero_division=0)`), percent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tasks import labels
from tasks.labels import label_index, label_problem, log_softmax

if TYPE_CHECKING:
    from qa.data import Problem

NAME = "text-classification"
RESOURCE_NAME = "text-classification"
RESOURCE_INFIX = f"-{RESOURCE_NAME}"  # <prefix>-text-classification-pipeline, datasets-text-classification/, ...
PURPOSE = "text classification (single texts or pairs)"
METRICS = ("accuracy", "macro_f1")  # percent; macro-F1 over the manifest's label names, as scikit-learn's
GATE_METRIC = "macro_f1"
LABEL_COLUMNS = ("labels",)
USES_LABEL_NAMES = True
SAMPLE_DATASET = "sample-text-classification"
# The columns a Parquet, CSV or Arrow file must have (`text_pair` and `id` are optional).
RECORD_COLUMNS = ("text", "label")
JSON_COLUMNS = ("label",)  # a CSV cell's label: an index (a JSON number) or a name (any other text)
AUTO_MODEL = "AutoModelForSequenceClassification"  # the transformers class the endpoint loads the model with
# What a request's "parameters" may set: top_k (labels per input, the best first; null for all of them) and the
# tokens an input is cut at.
PARAMETERS = ("top_k", "max_seq_length")
DEFAULT_MAX_SEQ_LENGTH = 512
PREDICT_BATCH_SIZE = 32  # inputs per forward pass of a request
HEAD = "classifier."  # the layer AutoModelForSequenceClassification adds to a BERT-style encoder
# WordPieces per whitespace-separated word, measured on data/sample-text-classification (300 records, 4,601 words)
# with the bundled tokenizer (config.paths.bundled_model_dir()), no special tokens: 5,788 / 4,601 = 1.258.
WORDPIECES_PER_WORD = 1.258
SPECIAL_TOKENS = {False: 2, True: 3}  # [CLS] text [SEP], and [CLS] text [SEP] text_pair [SEP] (BERT)


# ------------------------------------------------------------------------------------------------ records


def _text_problem(record: dict[str, Any], name: str, required: bool) -> tuple[str, str] | None:
    """(message, hint) when field `name` is not a non-empty string (absent is fine unless `required`)."""
    value = record.get(name)
    if value is None:
        return ("missing", f"add '{name}'") if required else None
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}", f"make '{name}' a string"
    if not value.strip():
        return "is empty", f"remove the record or fill in '{name}'"
    return None


def validate_record(record: Any, file: str, location: str, label_names: tuple[str, ...] | None) -> list[Problem]:
    """Every problem of one record, one per bad field (empty when the record is usable)."""
    return labels.record_problems(record, file, location, lambda fields: _field_problems(fields, label_names))


def _field_problems(record: dict[str, Any], label_names: tuple[str, ...] | None) -> list[labels.FieldProblem]:
    found = []
    for name, required in (("text", True), ("text_pair", False)):
        problem = _text_problem(record, name, required)
        if problem:
            found.append((name, *problem))
    label = record.get("label")
    if label is None:
        problem = ("missing", "add 'label': a name of the manifest's label_names, or its index")
    else:
        problem = label_problem(label, label_names)
    if problem:
        found.append(("label", *problem))
    return found


def label_names_problems(label_names: tuple[str, ...] | None, file: str) -> list[Problem]:
    """The manifest's label names: required, not empty, each a non-empty string, no name twice."""
    return labels.label_names_problems(label_names, file, NAME)


def normalized(record: dict[str, Any], label_names: tuple[str, ...] | None, record_id: str) -> dict[str, Any]:
    """The canonical record of a valid one: a string id (its own, else `record_id`), `text`, `text_pair` (None for
    a single text) and `label` as an index into `label_names`."""
    from qa.data import given_id

    assert label_names is not None  # validate_record refuses labels without names
    return {
        "id": given_id(record) or record_id,
        "text": record["text"],
        "text_pair": record.get("text_pair"),
        "label": label_index(record["label"], label_names),
    }


def estimated_tokens(record: dict[str, Any]) -> int:
    """Whole words of the text and the pair's second text (qa.claim_validation.certain_tokens)."""
    from qa.claim_validation import certain_tokens

    return certain_tokens(record["text"]) + certain_tokens(record.get("text_pair") or "")


def claim_features(max_seq_length: int, doc_stride: int) -> Callable[[dict[str, Any]], tuple[int, list[int]]]:
    """The claim's per-record estimate: one window (a record is one feature, never windowed: the window limit
    cannot refuse it), whose length is its words x WORDPIECES_PER_WORD and the special tokens, cut at
    max_seq_length."""
    from qa.claim_validation import estimated_tokens as estimated

    def estimate(record: dict[str, Any]) -> tuple[int, list[int]]:
        pair = record.get("text_pair")
        words = estimated(record["text"], WORDPIECES_PER_WORD) + estimated(pair or "", WORDPIECES_PER_WORD)
        return 1, [min(max_seq_length, words + SPECIAL_TOKENS[pair is not None])]

    return estimate


# ------------------------------------------------------------------------------------------------ features


def _encode(records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int) -> dict[str, list[Any]]:
    """The model inputs of each record, in order: single texts and pairs are tokenized in one call each
    (a tokenizer call takes either), pairs cut `longest_first`."""
    from qa.features import MODEL_INPUTS

    inputs = [name for name in MODEL_INPUTS if name in tokenizer.model_input_names]
    columns: dict[str, list[Any]] = {name: [None] * len(records) for name in inputs}
    for pairs in (False, True):
        rows = [i for i, record in enumerate(records) if (record.get("text_pair") is not None) is pairs]
        if not rows:
            continue
        texts = [records[i]["text"] for i in rows]
        second = [records[i]["text_pair"] for i in rows] if pairs else None
        encoded = tokenizer(texts, second, truncation="longest_first", max_length=max_seq_length, padding=False)
        for name in inputs:
            for row, values in zip(rows, encoded[name], strict=True):
                columns[name][row] = values
    return columns


def train_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """One feature per record, cut at max_seq_length (doc_stride unused), with its label index (`labels`) and the
    id of its record."""
    return {
        **_encode(records, tokenizer, max_seq_length),
        "labels": [record["label"] for record in records],
        "example_id": [record["id"] for record in records],
    }


def validation_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """One feature per record, cut as in training, with the id of its record (score reads the label there)."""
    return {**_encode(records, tokenizer, max_seq_length), "example_id": [record["id"] for record in records]}


# ------------------------------------------------------------------------------------------------ model


def load_model(name_or_path: str, label_names: tuple[str, ...] | None, log: logging.Logger) -> Any:
    """AutoModelForSequenceClassification with a head of one output per label name (id2label/label2id from them),
    in float32, the new head said in one line (qa.base_model.load_with_head)."""
    from qa.base_model import load_with_head
    from transformers import AutoModelForSequenceClassification

    assert label_names is not None  # ClaimManifest refuses a manifest without them (label_names_problems)
    return load_with_head(
        AutoModelForSequenceClassification,
        HEAD,
        NAME,
        name_or_path,
        log,
        **labels.head_config(label_names),
    )


# ------------------------------------------------------------------------------------------------ evaluation


def feature_output(model_output: Mapping[str, Any], row: int, tokens: slice) -> Any:
    """The logits of one feature (batch row `row`): one per label, whatever its tokens."""
    return model_output["logits"][row].copy()


def score(
    examples: list[dict[str, Any]],
    features: list[dict[str, Any]],
    outputs: list[Any],
    label_names: tuple[str, ...] | None,
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Accuracy and macro-F1 (percent; macro over every label name, a label neither predicted nor true adds an F1
    of 0 as scikit-learn's zero_division=0 does), the predicted label name by example id, and the mean
    cross-entropy of the logits (outputs[i]: feature i's, one feature per example)."""
    import numpy as np

    assert label_names is not None
    gold_by_id = {example["id"]: example["label"] for example in examples}
    ids = [feature["example_id"] for feature in features]
    gold = np.asarray([gold_by_id[example_id] for example_id in ids], dtype=np.int64)
    log_probabilities = log_softmax(np.stack(outputs))
    predicted = log_probabilities.argmax(axis=1)
    predictions = {example_id: label_names[int(p)] for example_id, p in zip(ids, predicted, strict=True)}
    loss = float(-np.mean(log_probabilities[np.arange(len(gold)), gold]))
    return label_scores(predicted, gold, len(label_names)), predictions, loss


def label_scores(predicted: Any, gold: Any, labels: int) -> dict[str, float]:
    """Accuracy and macro-F1 (percent) of predicted against gold label indices (numpy arrays), the macro over all
    `labels` label indices: a label neither predicted nor true adds an F1 of 0 (scikit-learn's zero_division=0)."""
    import numpy as np

    f1s = []
    for label in range(labels):
        true_positives = int(np.sum((predicted == label) & (gold == label)))
        predicted_or_true = int(np.sum(predicted == label)) + int(np.sum(gold == label))
        f1s.append(2 * true_positives / predicted_or_true if predicted_or_true else 0.0)
    return {"accuracy": 100.0 * float(np.mean(predicted == gold)), "macro_f1": 100.0 * float(np.mean(f1s))}


def response_scores(
    records: list[dict[str, Any]], responses: list[Any], label_names: tuple[str, ...] | None
) -> dict[str, float]:
    """Accuracy and macro-F1 of the endpoint's best labels (predict's answer to each record's example_request), as
    `score` computes them from the logits; ValueError naming a label that is none of `label_names`."""
    import numpy as np

    assert label_names is not None
    index = {name: i for i, name in enumerate(label_names)}
    best = [response[0]["label"] for response in responses]
    unknown = sorted({label for label in best if label not in index})
    if unknown:
        raise ValueError(f"the model answers labels {unknown} that are none of the label names {list(label_names)}")
    predicted = np.asarray([index[label] for label in best], dtype=np.int64)
    gold = np.asarray([record["label"] for record in records], dtype=np.int64)
    return label_scores(predicted, gold, len(label_names))


# ------------------------------------------------------------------------------------------------ serving


def _request_records(inputs: list[Any]) -> list[dict[str, Any]]:
    """{"text", "text_pair"} of each input (a string, or an object with a text and optionally its pair)."""
    records = []
    for item in inputs:
        item = {"text": item} if isinstance(item, str) else item
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("text"), str)
            or not isinstance(item.get("text_pair", ""), str)
        ):
            raise ValueError(
                'expected {"inputs": "<text>"}, {"inputs": {"text": "<text>", "text_pair": "<text>"}} '
                "(text_pair optional) or a list of such inputs"
            )
        records.append({"text": item["text"], "text_pair": item.get("text_pair")})
    return records


def predict(model: Any, tokenizer: Any, inputs: list[Any], parameters: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Per input, [{"label", "score"}]: the top_k labels (default 1; null: all of them) by probability, the best
    first, as transformers' text-classification pipeline answers. Inputs are cut at max_seq_length tokens (default
    the model's limit, at most DEFAULT_MAX_SEQ_LENGTH), as in training."""
    import numpy as np
    import torch
    from qa.batching import DynamicPaddingCollator
    from qa.features import model_max_length

    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; supported: {', '.join(PARAMETERS)}")
    labels = model.config.num_labels
    top_k = parameters.get("top_k", 1)
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or null (all {labels} labels), got {top_k!r}")
    limit = model_max_length(tokenizer, model.config) or DEFAULT_MAX_SEQ_LENGTH
    max_seq_length = min(parameters.get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH), limit)
    columns = _encode(_request_records(inputs), tokenizer, max_seq_length)
    features = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    collator, device = DynamicPaddingCollator.for_tokenizer(tokenizer), next(model.parameters()).device
    logits = []
    with torch.inference_mode():
        for start in range(0, len(features), PREDICT_BATCH_SIZE):
            batch = collator(features[start : start + PREDICT_BATCH_SIZE])
            output = model(**{name: tensor.to(device) for name, tensor in batch.items()})
            logits.append(output.logits.float().cpu().numpy())
    probabilities = np.exp(log_softmax(np.concatenate(logits)))
    best = np.argsort(-probabilities, axis=1, kind="stable")[:, : top_k or labels]
    return [
        [{"label": model.config.id2label[int(k)], "score": float(row[k])} for k in order]
        for row, order in zip(probabilities, best, strict=True)
    ]


def example_request(record: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's request for a validation record: its text, and its pair's second text when it has one."""
    pair = {"text_pair": record["text_pair"]} if record.get("text_pair") is not None else {}
    return {"inputs": {"text": record["text"], **pair}}


def describe_response(response: Any, record: dict[str, Any], label_names: tuple[str, ...] | None = None) -> str:
    """The demo's last line: the registered model's best label (the endpoint's answer to one input: predict's
    list of {"label", "score"}), its score and the record's label (by name, given `label_names`)."""
    best, reference = response[0], record["label"]
    if label_names is not None and isinstance(reference, int):
        reference = label_names[reference]
    return f'label of the registered model: "{best["label"]}" (score {best["score"]:.2f}; reference: "{reference}")'
