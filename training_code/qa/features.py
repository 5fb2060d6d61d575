"""Turn question/context records into model features, like the Hugging Face question-answering reference.

Long contexts are split into overlapping windows (`max_seq_length`, `doc_stride`). Training features carry
start/end token positions (the CLS index when the answer is not inside the window); validation features
keep the offsets of context tokens and the example id, for mapping predictions back to text.
No padding here: batches are padded dynamically by the collator.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from qa.data import Problem

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
LABELS = ("start_positions", "end_positions")
# transformers' stand-in for "no limit" in model_max_length is int(1e30); real limits are far below this.
NO_LIMIT = 1_000_000
# The most windows one example may make before ValidateAndTokenize refuses it (config.settings
# processing.max_windows_per_example): at 384 tokens, stride 128, a context of about 24,000 tokens. Beyond it nearly
# every training window of the example holds no answer (labelled with the CLS token), and one question costs the
# features of a hundred.
DEFAULT_MAX_WINDOWS_PER_EXAMPLE = 100
HISTOGRAM_BUCKET = 32  # tokens per bucket of stats.json's length_histogram


def too_many_windows(
    file: str, location: str, record_id: str, windows: int, max_seq_length: int, doc_stride: int, max_windows: int
) -> Problem:
    """The record-level problem of an example whose context makes `windows` windows, more than `max_windows`."""
    return Problem(
        file,
        location,
        record_id,
        "context",
        f"makes {windows} windows of {max_seq_length} tokens (doc stride {doc_stride}), more "
        f"than the {max_windows} allowed (processing.max_windows_per_example)",
        "split the context into passages, one record per passage that holds the answer",
        record_level=True,
    )


def length_histogram(lengths: Counter[int] | list[int]) -> dict[str, int]:
    """stats.json's length_histogram: "low-high" -> features, HISTOGRAM_BUCKET tokens per bucket, from feature
    lengths (a list, or a Counter of length -> features)."""
    counted = lengths if isinstance(lengths, Counter) else Counter(lengths)
    counts: Counter[int] = Counter()
    for length, features in counted.items():
        counts[(length // HISTOGRAM_BUCKET) * HISTOGRAM_BUCKET] += features
    return {f"{low}-{low + HISTOGRAM_BUCKET - 1}": counts[low] for low in sorted(counts)}


def model_max_length(tokenizer: Any, config: Any) -> int | None:
    """The most tokens the model can embed: its config's `max_position_embeddings`, or the tokenizer's
    `model_max_length` where that is smaller (RoBERTa reserves 2 of its 514 positions); None if neither says."""
    limits = (getattr(config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None))
    return min((n for n in limits if isinstance(n, int) and 0 < n < NO_LIMIT), default=None)


def length_limit_error(length: int, tokenizer: Any, config: Any, what: str) -> str | None:
    """One line naming the problem and the fix when `length` tokens do not fit the model, else None."""
    limit = model_max_length(tokenizer, config)
    if limit is None or length <= limit:
        return None
    return (
        f"{what} is {length} tokens, but {tokenizer.name_or_path} accepts at most {limit} "
        f"(max_position_embeddings); set hyperparameters.max_seq_length to {limit} or less"
    )


def _tokenize(tokenizer: Any, batch: dict[str, list[Any]], max_seq_length: int, doc_stride: int) -> Any:
    pad_on_right = tokenizer.padding_side == "right"
    questions = [q.lstrip() for q in batch["question"]]
    first, second = (questions, batch["context"]) if pad_on_right else (batch["context"], questions)
    return tokenizer(
        first,
        second,
        truncation="only_second" if pad_on_right else "only_first",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


def _context_index(tokenizer: Any) -> int:
    return 1 if tokenizer.padding_side == "right" else 0


def _keep_model_inputs(encoded: Any, tokenizer: Any) -> dict[str, list[Any]]:
    features = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if "token_type_ids" in tokenizer.model_input_names and "token_type_ids" in encoded:
        features["token_type_ids"] = encoded["token_type_ids"]
    return features


def prepare_train_features(
    batch: dict[str, list[Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """Windows with answer token positions; uses the first gold answer."""
    encoded = _tokenize(tokenizer, batch, max_seq_length, doc_stride)
    context_index = _context_index(tokenizer)
    starts, ends, example_ids = [], [], []
    for i, offsets in enumerate(encoded["offset_mapping"]):
        example_ids.append(batch["id"][encoded["overflow_to_sample_mapping"][i]])
        input_ids = encoded["input_ids"][i]
        cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
        sequence_ids = encoded.sequence_ids(i)
        answers = batch["answers"][encoded["overflow_to_sample_mapping"][i]]
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        token_start = sequence_ids.index(context_index)
        token_end = len(sequence_ids) - 1 - sequence_ids[::-1].index(context_index)
        if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
            starts.append(cls_index)
            ends.append(cls_index)
            continue
        while token_start < len(offsets) and sequence_ids[token_start] == context_index:
            if offsets[token_start][0] > start_char:
                break
            token_start += 1
        while sequence_ids[token_end] == context_index and offsets[token_end][1] >= end_char:
            token_end -= 1
        starts.append(token_start - 1)
        ends.append(token_end + 1)
    features = _keep_model_inputs(encoded, tokenizer)
    features["start_positions"] = starts
    features["end_positions"] = ends
    features["example_id"] = example_ids
    return features


def prepare_validation_features(
    batch: dict[str, list[Any]], tokenizer: Any, max_seq_length: int, doc_stride: int
) -> dict[str, list[Any]]:
    """Windows with context-only offsets (None elsewhere) and the id of the example they came from."""
    encoded = _tokenize(tokenizer, batch, max_seq_length, doc_stride)
    context_index = _context_index(tokenizer)
    example_ids, offset_mapping = [], []
    for i, offsets in enumerate(encoded["offset_mapping"]):
        sequence_ids = encoded.sequence_ids(i)
        example_ids.append(batch["id"][encoded["overflow_to_sample_mapping"][i]])
        offset_mapping.append(
            [list(offset) if sequence_ids[k] == context_index else None for k, offset in enumerate(offsets)]
        )
    features = _keep_model_inputs(encoded, tokenizer)
    features["offset_mapping"] = offset_mapping
    features["example_id"] = example_ids
    return features
