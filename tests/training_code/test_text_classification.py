"""text-classification: record validation, label names, features, metrics against scikit-learn, the model and its
serving, and the bundled sample dataset."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from qa.data import read_manifest
from tasks import text_classification as task

from config.paths import PROJECT_ROOT
from tests.conftest import ENTRY_POINT_PYTHONPATH
from tools.make_text_classification_sample import generate

NAMES = ("billing", "shipping", "technical", "account")
GOOD = {"id": "r1", "text": "I was charged twice.", "text_pair": "Invoice 12", "label": "billing"}
SAMPLE = PROJECT_ROOT / "data" / task.SAMPLE_DATASET
log = logging.getLogger("tc-test")


def problems_of(record, label_names=NAMES):
    return task.validate_record(record, "train/a.jsonl", "line 3", label_names)


# ------------------------------------------------------------------------------------------------ records


def test_module_imports_the_standard_library_only():
    """The claim's Lambda function imports validate_record with boto3 only: no numpy, torch or transformers."""
    heavy = ("numpy", "torch", "transformers")
    code = f"import sys, tasks.text_classification; print([m for m in {heavy!r} if m in sys.modules])"
    env = {"PYTHONPATH": ENTRY_POINT_PYTHONPATH}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout == "[]\n"


@pytest.mark.parametrize(
    ("record", "label_names"),
    [
        ({"id": 7, "text": "a single text", "label": 2}, NAMES),
        ({"text": "no id: named by its location", "label": "account"}, NAMES),
        (GOOD, NAMES),
    ],
)
def test_good_records_have_no_problem(record, label_names):
    assert problems_of(record, label_names) == []


@pytest.mark.parametrize(
    ("change", "field", "message", "hint"),
    [
        ({"label": "refunds"}, "label", "refunds is not one of the manifest's 4 label_names", "billing, shipping"),
        ({"label": 4}, "label", "index 4 is out of range: the manifest has 4 label_names", "from 0 to 3"),
        ({"label": -1}, "label", "index -1 is out of range", "from 0 to 3"),
        ({"label": 1.0}, "label", "must be a label name or an integer index, got float", "a name or its index"),
        ({"label": True}, "label", "got bool", "a name or its index"),
        ({"label": None}, "label", "missing", "add 'label'"),
        ({"text": ""}, "text", "is empty", "fill in 'text'"),
        ({"text": " \n"}, "text", "is empty", "fill in 'text'"),
        ({"text": None}, "text", "missing", "add 'text'"),
        ({"text": ["a", "list"]}, "text", "must be a string, got list", "make 'text' a string"),
        ({"text_pair": ""}, "text_pair", "is empty", "fill in 'text_pair'"),
        ({"text_pair": 12}, "text_pair", "must be a string, got int", "make 'text_pair' a string"),
    ],
)
def test_each_bad_field_is_one_problem_line_naming_file_location_id_and_field(change, field, message, hint):
    [problem] = problems_of({**GOOD, **change})
    line = str(problem)
    assert "\n" not in line
    assert line.startswith(f"train/a.jsonl:line 3 id=r1 field={field}: ")
    assert message in problem.message and hint in problem.hint
    assert problem.record_level


@pytest.mark.parametrize("label", ["billing", 0])
def test_a_label_without_label_names_says_to_add_them(label):
    [problem] = problems_of({**GOOD, "label": label}, label_names=None)
    assert problem.field == "label" and "the manifest has no label_names" in problem.message
    assert "add label_names to the manifest" in problem.hint


def test_a_bad_id_is_refused_and_the_record_named_by_its_location():
    [problem] = problems_of({**GOOD, "id": {"nested": "text"}})
    assert str(problem).startswith("train/a.jsonl:line 3 field=id: must be a non-empty string or an integer")


def test_every_bad_field_of_one_record_is_reported():
    problems = problems_of({"id": "r2", "text": "", "text_pair": 3, "label": "nope"})
    assert [p.field for p in problems] == ["text", "text_pair", "label"]


def test_a_record_that_is_not_an_object_is_one_problem():
    [problem] = problems_of(["text", "billing"])
    assert problem.message == "record is not a JSON object" and problem.record_level


@pytest.mark.parametrize(
    ("label_names", "message"),
    [
        (None, "text-classification needs the label names, and the manifest has none"),
        ((), "is empty"),
        (("billing", "shipping", "billing"), "label_names[2] (billing) repeats label_names[0]"),
        (("billing", ""), "label_names[1] is empty or not a string"),
    ],
)
def test_label_names_problems(label_names, message):
    [problem] = task.label_names_problems(label_names, "manifest.json")
    assert str(problem).startswith(f"manifest.json field=label_names: {message}")
    assert not problem.record_level  # the manifest is wrong, not a record


def test_good_label_names_have_no_problem():
    assert task.label_names_problems(NAMES, "manifest.json") == []


def test_normalized_records_have_a_string_id_and_label_indices():
    assert task.normalized({"id": 5, "text": "t", "label": "technical"}, NAMES, "a.jsonl:line 1") == {
        "id": "5",
        "text": "t",
        "text_pair": None,
        "label": 2,
    }
    given = task.normalized({"text": "t", "text_pair": "p", "label": 3}, NAMES, "a.jsonl:line 9")
    assert given == {"id": "a.jsonl:line 9", "text": "t", "text_pair": "p", "label": 3}


def test_estimated_tokens_is_a_lower_bound_of_the_tokenizer_s(tokenizer):
    record = {"text": "Where is my parcel, order #1234?", "text_pair": "It was due on Monday -- no news!"}
    assert task.estimated_tokens(record) == 13  # the words with a letter or digit: "--" makes none
    pieces = tokenizer(record["text"], record["text_pair"], add_special_tokens=False)["input_ids"]
    assert task.estimated_tokens(record) <= len(pieces)
    assert task.estimated_tokens({"text": "one two"}) == 2


def test_the_claim_s_length_estimate_is_close_to_the_tokenizer_s(tokenizer):
    records = [task.normalized(json.loads(line), NAMES, "") for line in sample_lines("train")]
    estimate = task.claim_features(max_seq_length=24, doc_stride=8)
    estimated = [estimate(record) for record in records]
    assert {windows for windows, _ in estimated} == {1} and max(n for _, [n] in estimated) == 24
    exact = [len(ids) for ids in task.train_features(records, tokenizer, 512, 0)["input_ids"]]
    uncut = task.claim_features(max_seq_length=512, doc_stride=0)
    assert sum(uncut(record)[1][0] for record in records) == pytest.approx(sum(exact), rel=0.05)


# ------------------------------------------------------------------------------------------------ features


def segment_lengths(features, row):
    types = features["token_type_ids"][row]
    return types.count(0) - 2, types.count(1) - 1  # [CLS] first [SEP] | second [SEP]


def test_a_long_pair_is_cut_longest_first_and_keeps_both_texts(tokenizer):
    long_text, short_pair = " ".join(["refund"] * 40), "order twelve"
    records = [
        {"id": "a", "text": long_text, "text_pair": short_pair, "label": 0},
        {"id": "b", "text": long_text, "text_pair": long_text, "label": 3},
    ]
    features = task.train_features(records, tokenizer, max_seq_length=16, doc_stride=4)
    assert [len(ids) for ids in features["input_ids"]] == [16, 16]
    assert segment_lengths(features, 0) == (13 - 2, 2)  # the longer text loses tokens, the short pair keeps all
    assert segment_lengths(features, 1) in ((7, 6), (6, 7))  # both long: both cut, to the same length or one apart
    assert features["labels"] == [0, 3]


def test_singles_and_pairs_keep_their_order(tokenizer):
    records: list[dict[str, Any]] = [
        {"id": "a", "text": "single one", "text_pair": None, "label": 1},
        {"id": "b", "text": "subject", "text_pair": "the message", "label": 2},
        {"id": "c", "text": "single two", "text_pair": None, "label": 0},
    ]
    features = task.validation_features(records, tokenizer, max_seq_length=32, doc_stride=8)
    assert features["example_id"] == ["a", "b", "c"]
    assert [1 in types for types in features["token_type_ids"]] == [False, True, False]
    expected = tokenizer("subject", "the message")["input_ids"]
    assert features["input_ids"][1] == expected
    assert "labels" not in features  # score reads the labels of the examples
    assert set(features) == {"input_ids", "token_type_ids", "attention_mask", "example_id"}


def test_validation_features_are_stored_and_read_back_as_they_were(tokenizer, tmp_path):
    from qa.feature_files import read_features, write_features

    records = [task.normalized(json.loads(line), NAMES, "") for line in sample_lines("validation")[:12]]
    features = task.validation_features(records, tokenizer, max_seq_length=24, doc_stride=8)
    write_features(tmp_path, features)
    assert read_features(tmp_path) == features


# ------------------------------------------------------------------------------------------------ metrics


def scored_case(seed: int = 0):
    """Examples whose gold labels are four of six names, logits that never predict `account` (index 3, a gold
    label) nor `other` (4, neither gold nor predicted) and may predict `spam` (5, never gold), and features in
    another order than the examples."""
    rng = np.random.default_rng(seed)
    names = (*NAMES, "other", "spam")
    gold = [0, 1, 2, 3] * 6 + [0, 2]
    logits = rng.normal(size=(len(gold), len(names))).astype(np.float32)
    logits[:, [3, 4]] -= 20  # account and other are never predicted
    logits[[0, 1, 2], [0, 1, 2]] += 30  # three sure hits
    examples = [{"id": f"e{i}", "label": label} for i, label in enumerate(gold)]
    order = rng.permutation(len(gold))
    features = [{"example_id": f"e{i}"} for i in order]
    outputs = [logits[i] for i in order]
    return names, np.asarray(gold), logits, examples, features, outputs


def test_metrics_equal_scikit_learn_s_on_the_same_predictions():
    from sklearn.metrics import accuracy_score, f1_score  # type: ignore[import-untyped]

    names, gold, logits, examples, features, outputs = scored_case()
    metrics, predictions, _ = task.score(examples, features, outputs, names)
    predicted = logits.argmax(axis=1)
    # Every name counts: one never predicted, one neither predicted nor true (each an F1 of 0), one never true.
    assert 3 not in predicted and 3 in gold and 4 not in predicted and 4 not in gold
    assert 5 in predicted and 5 not in gold
    assert set(metrics) == set(task.METRICS)
    assert metrics["accuracy"] == pytest.approx(100 * accuracy_score(gold, predicted))
    expected_f1 = f1_score(gold, predicted, average="macro", labels=list(range(len(names))), zero_division=0)
    assert metrics["macro_f1"] == pytest.approx(100 * expected_f1)
    assert 0 < metrics["macro_f1"] < metrics["accuracy"] < 100
    assert predictions == {example["id"]: names[p] for example, p in zip(examples, predicted, strict=True)}


def test_the_endpoint_s_best_labels_score_as_the_logits_do():
    """make evaluate scores the endpoint's answers (response_scores); the same predictions score as in training."""
    names, _, _, examples, features, outputs = scored_case(seed=2)
    metrics, predictions, _ = task.score(examples, features, outputs, names)
    responses = [
        [{"label": predictions[example["id"]], "score": 0.5}, {"label": "x", "score": 0.1}] for example in examples
    ]
    assert task.response_scores(examples, responses, names) == pytest.approx(metrics)
    with pytest.raises(ValueError, match=r"labels \['nope'\] that are none of the label names"):
        task.response_scores(examples[:1], [[{"label": "nope", "score": 1.0}]], names)


def test_evaluation_loss_is_torch_s_cross_entropy():
    import torch

    names, gold, logits, examples, features, outputs = scored_case(seed=1)
    _, _, loss = task.score(examples, features, outputs, names)
    expected = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(gold)).item()
    assert loss == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------------------------------ model


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    loaded = task.load_model(str(tiny_model_dir), NAMES, log)
    return loaded.eval()


def test_load_model_adds_a_head_per_label_in_float32_and_says_it_is_new(tiny_model_dir, caplog):
    import torch

    with caplog.at_level(logging.INFO, logger=log.name):
        loaded = task.load_model(str(tiny_model_dir), NAMES, log)
    [message] = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert message == "the text-classification head is new (the base model has none): this run trains it, as expected"
    assert loaded.config.num_labels == 4 and loaded.config.id2label == dict(enumerate(NAMES))
    assert loaded.config.label2id == {name: i for i, name in enumerate(NAMES)}
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}


def test_feature_output_and_score_on_the_model_s_logits(model, tokenizer):
    import torch
    from qa.batching import DynamicPaddingCollator

    examples = [task.normalized(json.loads(line), NAMES, "") for line in sample_lines("validation")[:9]]
    features = task.validation_features(examples, tokenizer, max_seq_length=64, doc_stride=16)
    rows = [dict(zip(features, values, strict=True)) for values in zip(*features.values(), strict=True)]
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer)
    batch = collator([{k: v for k, v in row.items() if k != "example_id"} for row in rows])
    with torch.inference_mode():
        arrays = {"logits": model(**batch).logits.numpy()}
    width = batch["input_ids"].shape[1]
    outputs = [task.feature_output(arrays, i, collator.tokens(len(r["input_ids"]), width)) for i, r in enumerate(rows)]
    assert [output.shape for output in outputs] == [(4,)] * 9
    metrics, predictions, loss = task.score(examples, rows, outputs, NAMES)
    assert all(0 <= metrics[name] <= 100 for name in task.METRICS)
    assert set(predictions) == {example["id"] for example in examples} and set(predictions.values()) <= set(NAMES)
    assert loss == pytest.approx(np.log(4), abs=0.2)  # a fresh head: about uniform


def test_predict_returns_labels_and_scores_the_best_first(model, tokenizer):
    inputs = ["My parcel has not arrived.", {"text": "Login problem", "text_pair": "I cannot sign in."}]
    every = task.predict(model, tokenizer, inputs, {"top_k": None})
    for answer in every:
        assert sorted(a["label"] for a in answer) == sorted(NAMES)
        scores = [a["score"] for a in answer]
        assert sum(scores) == pytest.approx(1.0) and scores == sorted(scores, reverse=True)
    best = task.predict(model, tokenizer, inputs, {})
    assert best == [answer[:1] for answer in every]
    assert [len(a) for a in task.predict(model, tokenizer, inputs, {"top_k": 2, "max_seq_length": 8})] == [2, 2]


@pytest.mark.parametrize(
    ("inputs", "parameters", "error"),
    [
        ([{"question": "q", "context": "c"}], {}, "expected"),
        (["text"], {"top_k": 0}, "top_k must be a positive integer or null"),
        (["text"], {"doc_stride": 4}, "unknown parameters ['doc_stride']"),
    ],
)
def test_predict_refuses_bad_requests_in_one_line(model, tokenizer, inputs, parameters, error):
    with pytest.raises(ValueError) as raised:
        task.predict(model, tokenizer, inputs, parameters)
    assert error in str(raised.value) and "\n" not in str(raised.value)


def test_the_demo_asks_a_validation_record_and_describes_the_answer_in_one_line(model, tokenizer):
    record = task.normalized({"id": "v", "text": "Address change", "text_pair": "Ship to Oslo?", "label": 1}, NAMES, "")
    request = task.example_request(record)
    assert request == {"inputs": {"text": "Address change", "text_pair": "Ship to Oslo?"}}
    [response] = task.predict(model, tokenizer, [request["inputs"]], {})
    line = task.describe_response(response, record, NAMES)
    label, score = response[0]["label"], response[0]["score"]
    assert line == f'label of the registered model: "{label}" (score {score:.2f}; reference: "shipping")'
    assert task.example_request({"text": "single", "text_pair": None}) == {"inputs": {"text": "single"}}


# ------------------------------------------------------------------------------------------------ sample dataset


def sample_lines(split: str) -> list[str]:
    return (SAMPLE / split / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()


def test_the_sample_dataset_validates_and_matches_its_manifest():
    manifest = json.loads((SAMPLE / "manifest.json").read_text(encoding="utf-8"))
    label_names = tuple(manifest["label_names"])
    assert manifest["task"] == task.NAME and task.label_names_problems(label_names, "manifest.json") == []
    files, problems = read_manifest(SAMPLE / "manifest.json", SAMPLE)
    assert problems == []
    labels: dict[str, list] = {}
    pairs = {}
    for split, paths in files.items():
        [path] = paths
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for number, record in enumerate(records, start=1):
            assert task.validate_record(record, path.name, f"line {number}", label_names) == []
        labels[split] = [record["label"] for record in records]
        pairs[split] = sum(record.get("text_pair") is not None for record in records)
    assert len(labels["train"]) == 240 and len(labels["validation"]) == 60
    assert set(labels["train"]) == set(label_names)  # names in train, every name used
    assert set(labels["validation"]) == set(range(len(label_names)))  # indices in validation
    assert pairs["train"] > 0 and pairs["validation"] > 0


def test_the_sample_dataset_is_what_its_generator_writes(tmp_path):
    generate(tmp_path)
    for name in ("manifest.json", "train/train.jsonl", "validation/validation.jsonl"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


def test_sample_validation_texts_are_not_training_texts():
    def texts(split: str) -> set[str]:
        return {json.dumps([r["text"], r.get("text_pair")]) for r in map(json.loads, sample_lines(split))}

    assert not texts("train") & texts("validation")
    assert len(texts("train")) == 240
