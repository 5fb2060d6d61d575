"""token-classification: record validation, sub-word alignment, entity metrics against seqeval, the model and its
serving."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from tasks import token_classification as task

NAMES = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
GOOD = {"id": "s1", "tokens": ["Ines", "Marrow", "visited", "Oslo"], "ner_tags": ["B-PER", "I-PER", "O", "B-LOC"]}
log = logging.getLogger("ner-test")


def problems_of(record, label_names=NAMES):
    return task.validate_record(record, "train/a.jsonl", "line 3", label_names)


def test_a_good_record_has_no_problem():
    assert problems_of(GOOD) == [] and problems_of({**GOOD, "ner_tags": [1, 2, 0, 5]}) == []


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"ner_tags": ["B-PER", "I-PER", "O", "B-CITY"]}, "ner_tags", "ner_tags[3] B-CITY is not one of"),
        ({"ner_tags": [1, 2, 0, 7]}, "ner_tags", "ner_tags[3] index 7 is out of range"),
        ({"ner_tags": ["O", "O"]}, "ner_tags", "has 2 tags for 4 tokens"),
        ({"tokens": [], "ner_tags": []}, "tokens", "must be a non-empty list"),
        ({"tokens": ["Ines", "", "visited", "Oslo"]}, "tokens", "tokens[1] is empty"),
        (
            {"ner_tags": ["B-PER", "I-PER", "O", "I-LOC"]},
            "ner_tags",
            "unknown IOB transition at ner_tags[3]: O -> I-LOC",
        ),
        ({"ner_tags": ["B-PER", "I-ORG", "O", "O"]}, "ner_tags", "unknown IOB transition at ner_tags[1]"),
    ],
)
def test_each_bad_field_is_one_problem_line(change, field, message):
    [problem] = problems_of({**GOOD, **change})
    line = str(problem)
    assert "\n" not in line and line.startswith(f"train/a.jsonl:line 3 id=s1 field={field}: ")
    assert message in problem.message and problem.record_level


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("O", "PER"), "label_names[1] (PER) is not an IOB2 name"),
        (("O", "B-"), "label_names[1] (B-) is not an IOB2 name"),
        (None, "token-classification needs the label names"),
    ],
)
def test_label_names_must_be_iob2(names, message):
    [problem] = task.label_names_problems(names, "manifest.json")
    assert message in problem.message
    assert task.label_names_problems(NAMES, "manifest.json") == []


def test_normalized_has_a_string_id_and_tag_indices():
    assert task.normalized({**GOOD, "id": 4}, NAMES, "x") == {**GOOD, "id": "4", "ner_tags": [1, 2, 0, 5]}


def test_a_word_of_several_sub_tokens_gets_one_label(tokenizer):
    word = "Marrowfieldston"
    pieces = tokenizer.tokenize(word)
    assert len(pieces) >= 3
    record = task.normalized({"tokens": ["Ines", word, "left"], "ner_tags": ["B-PER", "I-PER", "O"]}, NAMES, "r")
    features = task.train_features([record], tokenizer, 64, 0)
    [labels] = features["labels"]
    first = 1 + len(tokenizer.tokenize("Ines"))  # after [CLS] and the first word
    assert len(labels) == len(features["input_ids"][0]) == first + len(pieces) + len(tokenizer.tokenize("left")) + 1
    assert [label for label in labels if label != -100] == [1, 2, 0]
    assert labels[first : first + len(pieces)] == [2] + [-100] * (len(pieces) - 1)
    [word_ids] = task.validation_features([record], tokenizer, 64, 0)["word_ids"]
    assert [w for w in word_ids if w != -1] == [0, 1, 2] and word_ids[0] == -1
    cut = task.train_features([record], tokenizer, 4, 0)["input_ids"][0]
    assert len(cut) == 4  # training truncates at max_seq_length


def test_metrics_equal_seqeval_s():
    from seqeval.metrics import f1_score, precision_score, recall_score  # type: ignore[import-untyped]

    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"], ["O", "B-LOC", "I-LOC"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["O", "I-PER", "I-PER", "O", "B-PER"], ["O", "B-LOC", "I-LOC"]]
    # partial entities, an I- start, and ORG never predicted
    metrics = task.entity_scores(gold, predicted)
    assert metrics["precision"] == pytest.approx(100 * precision_score(gold, predicted))
    assert metrics["recall"] == pytest.approx(100 * recall_score(gold, predicted))
    assert metrics["f1"] == pytest.approx(100 * f1_score(gold, predicted))
    assert 0 < metrics["f1"] < 100


def test_the_endpoint_s_entity_groups_score_as_seqeval():
    """make evaluate scores the endpoint's entity groups (response_scores), whose word spans are over the request's
    whitespace-split words: a token holding a space ("Acme Corp") is two of them."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    tokens = [["Ines", "Marrow", "met", "Oslo"], ["Acme Corp", "hired", "Ines"], ["in", "New York", "City"]]
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"], ["O", "B-LOC", "I-LOC"]]
    # The model's groups, in request words: sentence 2 is "Acme Corp hired Ines" (4 words), 3 "in New York City".
    groups = [
        [{"entity_group": "PER", "words": [0, 0]}, {"entity_group": "LOC", "words": [3, 3]}],
        [{"entity_group": "ORG", "words": [0, 1]}, {"entity_group": "PER", "words": [2, 3]}],
        [{"entity_group": "LOC", "words": [1, 3]}],
    ]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-PER", "I-PER"], ["O", "B-LOC", "I-LOC"]]
    records = [
        {"id": f"s{i}", "tokens": words, "ner_tags": [NAMES.index(tag) for tag in tags]}
        for i, (words, tags) in enumerate(zip(tokens, gold, strict=True))
    ]
    metrics = task.response_scores(records, groups, NAMES)
    assert metrics["precision"] == pytest.approx(100 * precision_score(gold, predicted))
    assert metrics["recall"] == pytest.approx(100 * recall_score(gold, predicted))
    assert metrics["f1"] == pytest.approx(100 * f1_score(gold, predicted))
    assert 0 < metrics["f1"] < 100


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return task.load_model(str(tiny_model_dir), NAMES, log).eval()


def test_feature_output_and_score_on_the_model_s_logits(model, tokenizer):
    import torch
    from qa.batching import DynamicPaddingCollator

    examples = [
        task.normalized(
            {**GOOD, "id": f"e{i}", "tokens": GOOD["tokens"][: i + 1], "ner_tags": GOOD["ner_tags"][: i + 1]}, NAMES, ""
        )
        for i in range(4)
    ]
    features = task.validation_features(examples, tokenizer, 64, 0)
    rows = [dict(zip(features, values, strict=True)) for values in zip(*features.values(), strict=True)]
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer)
    batch = collator([{k: v for k, v in r.items() if k not in ("example_id", "word_ids")} for r in rows])
    with torch.inference_mode():
        arrays = {"logits": model(**batch).logits.numpy()}
    width = batch["input_ids"].shape[1]
    outputs = [task.feature_output(arrays, i, collator.tokens(len(r["input_ids"]), width)) for i, r in enumerate(rows)]
    assert [o.shape for o in outputs] == [(len(r["input_ids"]), len(NAMES)) for r in rows]
    metrics, predictions, loss = task.score(examples, rows, outputs, NAMES)
    assert set(metrics) == set(task.METRICS) and all(0 <= v <= 100 for v in metrics.values())
    assert [len(predictions[e["id"]]) for e in examples] == [1, 2, 3, 4]
    assert loss == pytest.approx(np.log(len(NAMES)), abs=0.3)


def test_predict_groups_slice_the_text(model, tokenizer):
    text = "Ines  Marrow visited\tOslo  with Acme Corp"
    [groups] = task.predict(model, tokenizer, [{"text": text}], {})
    for group in groups:
        assert text[group["start"] : group["end"]] == group["word"] and 0 <= group["score"] <= 1
    assert task.predict(model, tokenizer, [text], {}) == [groups]
    with pytest.raises(ValueError, match="expected"):
        task.predict(model, tokenizer, [{"question": "q"}], {})
    record = task.normalized(GOOD, NAMES, "")
    assert task.example_request(record) == {"inputs": {"text": "Ines Marrow visited Oslo"}}
    line = task.describe_response(groups, record, NAMES)
    assert line.startswith("entities of the registered model: ")
    assert line.endswith('(reference: PER "Ines Marrow", LOC "Oslo")')


# ------------------------------------------------------------------------------------------------ sample dataset


def test_the_sample_dataset_validates_and_is_what_its_generator_writes(tmp_path):
    import json

    from qa.data import read_manifest

    from config.paths import PROJECT_ROOT
    from tools.make_token_classification_sample import generate

    sample = PROJECT_ROOT / "data" / task.SAMPLE_DATASET
    manifest = json.loads((sample / "manifest.json").read_text(encoding="utf-8"))
    label_names = tuple(manifest["label_names"])
    assert manifest["task"] == task.NAME and task.label_names_problems(label_names, "manifest.json") == []
    files, problems = read_manifest(sample / "manifest.json", sample)
    assert problems == []
    counts = {}
    for split, [path] in files.items():
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for number, record in enumerate(records, start=1):
            assert task.validate_record(record, path.name, f"line {number}", label_names) == []
        counts[split] = len(records)
    assert counts == {"train": 240, "validation": 60}
    generate(tmp_path)
    for name in ("manifest.json", "train/train.jsonl", "validation/validation.jsonl"):
        assert (tmp_path / name).read_bytes() == (sample / name).read_bytes(), name
