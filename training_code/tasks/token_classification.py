"""Token classification of words with IOB2 tags (`tokens`, `ner_tags`), e.g. named-entity recognition.

Records: `tokens` (a non-empty list of non-empty strings, the words), `ner_tags` (one per word: a name of the
manifest's `label_names` or its index), optionally `id`. Names are IOB2 (`O`, `B-X`, `I-X`); an `I-X` that does not
follow `B-X` or `I-X` is refused.

Features: words tokenized with `is_split_into_words=True`; the first sub-token of each word carries its tag, the
others and the special tokens -100 (as transformers' run_ner). Training cuts a sentence at max_seq_length tokens
(its later words are not trained on). Evaluation makes one window per sentence too: words past max_seq_length are
predicted `O` (doc_stride unused). Metrics: entity-level precision, recall and F1, percent, as seqeval's default
mode computes them on IOB2 tags (computed here in pure Python).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tasks import labels
from tasks.labels import label_index, label_problem, log_softmax

if TYPE_CHECKING:
    from qa.data import Problem

NAME = "token-classification"
RESOURCE_NAME = "token-classification"
RESOURCE_INFIX = f"-{RESOURCE_NAME}"  # <prefix>-token-classification-pipeline, datasets-token-classification/, ...
PURPOSE = "token classification (IOB2 entities)"
METRICS = ("precision", "recall", "f1")  # entity level, percent, as seqeval computes them (default mode, IOB2)
GATE_METRIC = "f1"
LABEL_COLUMNS = ("labels",)
USES_LABEL_NAMES = True
SAMPLE_DATASET = "sample-token-classification"
PARAMETERS = ("max_seq_length",)  # what a request's "parameters" may set
RECORD_COLUMNS = ("tokens", "ner_tags")  # the columns a Parquet, CSV or Arrow file must have (`id` is optional)
JSON_COLUMNS = ("tokens", "ner_tags")  # CSV cells holding JSON lists
AUTO_MODEL = "AutoModelForTokenClassification"  # the transformers class the endpoint loads the model with
DEFAULT_MAX_SEQ_LENGTH = 512
HEAD = "classifier."  # the layer AutoModelForTokenClassification adds to a BERT-style encoder
IGNORED = -100  # the label of sub-tokens the loss skips (special tokens, a word's second and later pieces)
NOT_A_WORD = -1  # word_ids of a sub-token that carries no prediction
OUTSIDE = "O"
SPECIAL_TOKENS = 2  # [CLS] words [SEP] (BERT)
WORDPIECES_PER_WORD = 1.258  # as text_classification measured it on short English sentences


# ------------------------------------------------------------------------------------------------ records


def _iob_problem(name: str) -> bool:
    return not (name == OUTSIDE or (name[:2] in ("B-", "I-") and len(name) > 2))


def _tag_names(tags: list[Any], label_names: tuple[str, ...]) -> list[str]:
    return [label_names[tag] if isinstance(tag, int) else tag for tag in tags]


def validate_record(record: Any, file: str, location: str, label_names: tuple[str, ...] | None) -> list[Problem]:
    """Every problem of one record, one per bad field (empty when the record is usable)."""
    return labels.record_problems(record, file, location, lambda fields: _field_problems(fields, label_names))


def _field_problems(record: dict[str, Any], label_names: tuple[str, ...] | None) -> list[labels.FieldProblem]:
    found: list[labels.FieldProblem] = []
    tokens, tags = record.get("tokens"), record.get("ner_tags")
    if not isinstance(tokens, list) or not tokens:
        found.append(("tokens", "must be a non-empty list of words", "give 'tokens' as a list of strings"))
    else:
        bad = [i for i, token in enumerate(tokens) if not isinstance(token, str) or not token.strip()]
        if bad:
            found.append(("tokens", f"tokens[{bad[0]}] is empty or not a string", "every word a non-empty string"))
    if not isinstance(tags, list):
        found.append(("ner_tags", "must be a list of tags, one per word", "add 'ner_tags'"))
    elif isinstance(tokens, list) and len(tags) != len(tokens):
        found.append(("ner_tags", f"has {len(tags)} tags for {len(tokens)} tokens", "give exactly one tag per word"))
    else:
        problems = [(i, label_problem(tag, label_names)) for i, tag in enumerate(tags)]
        first = next(((i, p) for i, p in problems if p), None)
        if first:
            found.append(("ner_tags", f"ner_tags[{first[0]}] {first[1][0]}", first[1][1]))
        elif label_names is not None:
            names = _tag_names(tags, label_names)
            for i, name in enumerate(names):
                previous = names[i - 1] if i else OUTSIDE
                if name.startswith("I-") and previous not in (f"B-{name[2:]}", name):
                    found.append(
                        (
                            "ner_tags",
                            f"unknown IOB transition at ner_tags[{i}]: {previous} -> {name}",
                            f"start the entity with B-{name[2:]} (IOB2)",
                        )
                    )
                    break
    return found


def label_names_problems(label_names: tuple[str, ...] | None, file: str) -> list[Problem]:
    """The manifest's label names: as text_classification's, and each an IOB2 name (O, B-X, I-X)."""
    from qa.data import Problem, shown_id

    problems = labels.label_names_problems(label_names, file, NAME)
    for index, name in enumerate(label_names or ()):
        if isinstance(name, str) and name.strip() and _iob_problem(name):
            problems.append(
                Problem(
                    file,
                    "",
                    None,
                    "label_names",
                    f"label_names[{index}] ({shown_id(name)}) is not an IOB2 name",
                    "name every label O, B-<type> or I-<type>",
                )
            )
    return problems


def normalized(record: dict[str, Any], label_names: tuple[str, ...] | None, record_id: str) -> dict[str, Any]:
    """The canonical record of a valid one: a string id (its own, else `record_id`), `tokens` and `ner_tags` as
    indices into `label_names`."""
    from qa.data import given_id

    assert label_names is not None  # validate_record refuses tags without names
    return {
        "id": given_id(record) or record_id,
        "tokens": list(record["tokens"]),
        "ner_tags": [label_index(tag, label_names) for tag in record["ner_tags"]],
    }


def estimated_tokens(record: dict[str, Any]) -> int:
    """Words holding a letter or digit (qa.claim_validation.certain_tokens)."""
    from qa.claim_validation import certain_tokens

    return certain_tokens(" ".join(record["tokens"]))


def claim_features(max_seq_length: int, doc_stride: int) -> Callable[[dict[str, Any]], tuple[int, list[int]]]:
    """One window per record, its words x WORDPIECES_PER_WORD and the special tokens, cut at max_seq_length."""

    def estimate(record: dict[str, Any]) -> tuple[int, list[int]]:
        words = max(1, round(len(record["tokens"]) * WORDPIECES_PER_WORD))
        return 1, [min(max_seq_length, words + SPECIAL_TOKENS)]

    return estimate


# ------------------------------------------------------------------------------------------------ features


def _encode(words: list[list[str]], tokenizer: Any, max_seq_length: int) -> tuple[dict[str, list[Any]], list[Any]]:
    """Model inputs of each word list (is_split_into_words, cut at max_seq_length), and each row's
    first-sub-token word index (NOT_A_WORD elsewhere)."""
    from qa.features import MODEL_INPUTS

    encoded = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_seq_length, padding=False)
    columns = {name: list(encoded[name]) for name in MODEL_INPUTS if name in tokenizer.model_input_names}
    firsts = []
    for row in range(len(words)):
        seen, first = set(), []
        for word in encoded.word_ids(row):
            first.append(NOT_A_WORD if word is None or word in seen else word)
            seen.add(word)
        firsts.append(first)
    return columns, firsts


def train_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """One feature per record, cut at max_seq_length (later words are not trained on; doc_stride unused), `labels`
    the tag of each word's first sub-token, -100 elsewhere, and the id of its record."""
    columns, firsts = _encode([record["tokens"] for record in records], tokenizer, max_seq_length)
    columns["labels"] = [
        [IGNORED if word == NOT_A_WORD else record["ner_tags"][word] for word in first]
        for record, first in zip(records, firsts, strict=True)
    ]
    columns["example_id"] = [record["id"] for record in records]
    return columns


def validation_features(
    records: list[dict[str, Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """One feature per record, cut as in training (words past the cut are predicted O), with `word_ids` (the word
    index on a word's first sub-token, -1 elsewhere) and `example_id`."""
    columns, firsts = _encode([record["tokens"] for record in records], tokenizer, max_seq_length)
    return {**columns, "word_ids": firsts, "example_id": [record["id"] for record in records]}


# ------------------------------------------------------------------------------------------------ model


def load_model(name_or_path: str, label_names: tuple[str, ...] | None, log: logging.Logger) -> Any:
    """AutoModelForTokenClassification with one output per label name, float32, the new head said in one line."""
    from qa.base_model import load_with_head
    from transformers import AutoModelForTokenClassification

    assert label_names is not None
    return load_with_head(
        AutoModelForTokenClassification,
        HEAD,
        NAME,
        name_or_path,
        log,
        **labels.head_config(label_names),
    )


# ------------------------------------------------------------------------------------------------ evaluation


def feature_output(model_output: Mapping[str, Any], row: int, tokens: slice) -> Any:
    """The logits of one feature's tokens (tokens x labels)."""
    return model_output["logits"][row][tokens].copy()


def entities(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first word, last word) of each entity of IOB2 tags, as seqeval's default mode reads them: a chunk
    starts at B-X, at an I-X after another type or O, and ends before O, B-, or another type."""
    found = set()
    start, kind = None, None
    for i, tag in enumerate([*tags, OUTSIDE]):
        prefix, tag_kind = (tag[0], tag[2:]) if tag != OUTSIDE else (OUTSIDE, "")
        if start is not None and (prefix in (OUTSIDE, "B") or tag_kind != kind):
            found.add((str(kind), start, i - 1))
            start = None
        if prefix in ("B", "I") and start is None:
            start, kind = i, tag_kind
    return found


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 (percent) of entities over sentences, zero when undefined (as seqeval)."""
    true = [{(n, *e) for e in entities(tags)} for n, tags in enumerate(gold)]
    guessed = [{(n, *e) for e in entities(tags)} for n, tags in enumerate(predicted)]
    hits = sum(len(t & g) for t, g in zip(true, guessed, strict=True))
    n_true, n_guessed = sum(map(len, true)), sum(map(len, guessed))
    precision = hits / n_guessed if n_guessed else 0.0
    recall = hits / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1}


def score(
    examples: list[dict[str, Any]],
    features: list[dict[str, Any]],
    outputs: list[Any],
    label_names: tuple[str, ...] | None,
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Entity-level precision, recall and F1 (percent), the predicted tag names per word by example id (words past
    the window O), and the mean cross-entropy over the labelled sub-tokens."""
    import numpy as np

    assert label_names is not None
    by_id = {example["id"]: example for example in examples}
    losses: list[float] = []
    predictions: dict[str, list[str]] = {}
    gold, guessed = [], []
    for feature, output in zip(features, outputs, strict=True):
        example = by_id[feature["example_id"]]
        log_probabilities = log_softmax(output)
        words = np.asarray(feature["word_ids"])
        rows = np.flatnonzero(words != NOT_A_WORD)
        tags = np.asarray(example["ner_tags"])[words[rows]]
        losses.extend((-log_probabilities[rows, tags]).tolist())
        names = [OUTSIDE] * len(example["tokens"])
        for row in rows:
            names[int(words[row])] = label_names[int(log_probabilities[row].argmax())]
        predictions[example["id"]] = names
        gold.append([label_names[tag] for tag in example["ner_tags"]])
        guessed.append(names)
    return entity_scores(gold, guessed), predictions, float(np.mean(losses)) if losses else 0.0


def response_scores(
    records: list[dict[str, Any]], responses: list[Any], label_names: tuple[str, ...] | None
) -> dict[str, float]:
    """Entity-level precision, recall and F1 of the endpoint's entity groups (predict's answer to each record's
    example_request: its tokens joined by spaces), as `score` computes them. A token holding whitespace is several
    words of the request; a group's words are mapped back to the record's tokens."""
    assert label_names is not None
    gold, guessed = [], []
    for record, groups in zip(records, responses, strict=True):
        token_of_word = [i for i, token in enumerate(record["tokens"]) for _ in _words(token)]
        tags = [OUTSIDE] * len(record["tokens"])
        for group in groups:
            first, last = (token_of_word[word] for word in group["words"])
            tags[first : last + 1] = [f"B-{group['entity_group']}"] + [f"I-{group['entity_group']}"] * (last - first)
        gold.append([label_names[tag] for tag in record["ner_tags"]])
        guessed.append(tags)
    return entity_scores(gold, guessed)


# ------------------------------------------------------------------------------------------------ serving


def _words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) of each whitespace-separated word of `text`."""
    import re

    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def predict(model: Any, tokenizer: Any, inputs: list[Any], parameters: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Per input ({"text"} or a bare string, words split on whitespace), its entity groups: [{"entity_group",
    "score" (mean of the words' top probabilities), "word", "start", "end", "words": [first, last]}]."""
    import numpy as np
    import torch
    from qa.batching import DynamicPaddingCollator
    from qa.features import model_max_length

    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; supported: {', '.join(PARAMETERS)}")
    texts = [item if isinstance(item, str) else item.get("text") if isinstance(item, dict) else None for item in inputs]
    if any(not isinstance(text, str) or not text.strip() for text in texts):
        raise ValueError('expected {"inputs": "<text>"}, {"inputs": {"text": "<text>"}} or a list of such inputs')
    limit = model_max_length(tokenizer, model.config) or DEFAULT_MAX_SEQ_LENGTH
    max_seq_length = min(parameters.get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH), limit)
    spans = [_words(str(text)) for text in texts]
    columns, firsts = _encode([[w for w, _, _ in words] for words in spans], tokenizer, max_seq_length)
    collator, device = DynamicPaddingCollator.for_tokenizer(tokenizer), next(model.parameters()).device
    answers = []
    with torch.inference_mode():
        for row, (text, words) in enumerate(zip(texts, spans, strict=True)):
            batch = collator([{name: values[row] for name, values in columns.items()}])
            logits = model(**{name: tensor.to(device) for name, tensor in batch.items()}).logits[0].float().cpu()
            probabilities = np.exp(log_softmax(logits.numpy()))
            tags, scores = [OUTSIDE] * len(words), [0.0] * len(words)
            for token, word in enumerate(firsts[row]):
                if word != NOT_A_WORD:
                    tags[word] = model.config.id2label[int(probabilities[token].argmax())]
                    scores[word] = float(probabilities[token].max())
            groups = []
            for kind, first, last in sorted(entities(tags), key=lambda entity: entity[1]):
                start, end = words[first][1], words[last][2]
                groups.append(
                    {
                        "entity_group": kind,
                        "score": float(np.mean(scores[first : last + 1])),
                        "word": str(text)[start:end],
                        "start": start,
                        "end": end,
                        "words": [first, last],
                    }
                )
            answers.append(groups)
    return answers


def example_request(record: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's request for a validation record: its words joined by spaces."""
    return {"inputs": {"text": " ".join(record["tokens"])}}


def describe_response(response: Any, record: dict[str, Any], label_names: tuple[str, ...] | None = None) -> str:
    """The demo's last line: the entities the registered model found and the record's own (given `label_names`)."""
    found = ", ".join(f'{g["entity_group"]} "{g["word"]}"' for g in response) or "none"
    line = f"entities of the registered model: {found}"
    if label_names is None:
        return line
    tags = _tag_names(record["ner_tags"], label_names)
    reference = ", ".join(
        f'{kind} "{" ".join(record["tokens"][first : last + 1])}"'
        for kind, first, last in sorted(entities(tags), key=lambda entity: entity[1])
    )
    return f"{line} (reference: {reference or 'none'})"
