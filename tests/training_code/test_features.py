"""Tokenization: labelled positions map back to the answer text; CLS where the window lacks the answer."""

from __future__ import annotations

import pytest
from qa.features import prepare_train_features, prepare_validation_features


def batch_of(context: str, answer: str, question: str = "Which one?") -> dict:
    start = context.index(answer)
    return {
        "id": ["x"],
        "question": [question],
        "context": [context],
        "answers": [{"text": [answer], "answer_start": [start]}],
    }


def decoded_answers(tokenizer, batch, max_seq_length=384, doc_stride=128):
    """(start, end, text between the labelled tokens' character offsets) for every window."""
    features = prepare_train_features(batch, tokenizer, max_seq_length, doc_stride)
    encoded = tokenizer(
        [batch["question"][0].lstrip()],
        batch["context"],
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    out = []
    for i, (start, end) in enumerate(zip(features["start_positions"], features["end_positions"], strict=True)):
        offsets = encoded["offset_mapping"][i]
        text = batch["context"][0][offsets[start][0] : offsets[end][1]] if start else ""
        out.append((start, end, text))
    return out


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        ("The tower was built by Gustave Eiffel in 1889.", "Gustave Eiffel"),
        ("Le café se trouve près de l'Opéra Garnier à Paris.", "l'Opéra Garnier"),
        ("Answer   with    multiple     spaces inside it.", "multiple     spaces"),
        ("Über Zürich fließt die Limmat in den See.", "Zürich"),
        ("Emoji 🙂 before the answer: forty-two.", "forty-two"),
    ],
)
def test_positions_map_back_to_the_answer(tokenizer, context, answer):
    [(start, end, text)] = decoded_answers(tokenizer, batch_of(context, answer))
    assert 0 < start <= end
    # The uncased tokenizer lower-cases and strips accents only in ids; offsets point at the original text.
    assert text == answer


def test_long_context_windows_label_cls_when_the_answer_is_outside(tokenizer):
    filler = " ".join(f"word{i}" for i in range(120))
    context = f"{filler} The hidden treasure lies under the old oak. {filler}"
    results = decoded_answers(tokenizer, batch_of(context, "the old oak"), max_seq_length=64, doc_stride=24)
    assert len(results) > 3
    inside = [r for r in results if r[0] != 0]
    outside = [r for r in results if r[0] == 0]
    assert inside and outside
    assert all(text == "the old oak" for _, _, text in inside)
    assert all(start == end == 0 for start, end, _ in outside)  # CLS index


def test_answer_spanning_a_window_boundary_is_cls_in_the_cut_window(tokenizer):
    filler = " ".join(f"w{i}" for i in range(40))
    answer = "alpha beta gamma delta epsilon zeta eta theta"
    context = f"{filler} {answer} end."
    results = decoded_answers(tokenizer, batch_of(context, answer), max_seq_length=48, doc_stride=16)
    # Some window holds the whole answer; windows that cut it are labelled CLS, never a partial span.
    assert any(text == answer for _, _, text in results)
    assert all(text in ("", answer) for _, _, text in results)


def test_validation_features_keep_only_context_offsets_and_ids(tokenizer):
    batch = batch_of("Paris is the capital of France.", "Paris", question="Capital?")
    features = prepare_validation_features(batch, tokenizer, 384, 128)
    [offsets] = features["offset_mapping"]
    assert features["example_id"] == ["x"]
    question_tokens = len(tokenizer("Capital?")["input_ids"])
    assert all(o is None for o in offsets[:question_tokens])
    assert offsets[-1] is None  # final [SEP]
    context_offsets = [o for o in offsets if o is not None]
    assert context_offsets[0] == [0, 5]
    assert "start_positions" not in features
