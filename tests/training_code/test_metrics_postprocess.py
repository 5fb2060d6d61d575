"""SQuAD EM/F1 and n-best post-processing against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from qa.metrics import exact_match, f1, normalize_answer, squad_scores
from qa.postprocess import Span, best_spans


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an  apple, a   pear ", "apple pear"),
        ("Theory of the Atom", "theory of atom"),
        ("U.S.A.", "usa"),
    ],
)
def test_normalisation(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match_and_f1_by_hand():
    assert exact_match("the Eiffel tower", "Eiffel Tower.") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    # prediction tokens {eiffel}, gold {eiffel, tower}: precision 1, recall 1/2 -> F1 2/3
    assert f1("Eiffel", "Eiffel Tower") == pytest.approx(2 / 3)
    # {in, 1889} vs {1889}: precision 1/2, recall 1 -> 2/3
    assert f1("in 1889", "1889") == pytest.approx(2 / 3)
    assert f1("Paris", "London") == 0.0
    assert f1("", "London") == 0.0


def test_best_of_multiple_gold_answers_and_missing_predictions():
    gold = {"a": ["Denver Broncos", "The Broncos"], "b": ["1889"], "c": ["blue"]}
    predictions = {"a": "Broncos", "b": "1889"}  # c missing -> 0
    scores = squad_scores(predictions, gold)
    # a: EM 1 via "The Broncos" -> "broncos"; b: EM 1; c: 0  -> EM 2/3, F1 2/3
    assert scores == {"exact_match": pytest.approx(200 / 3), "f1": pytest.approx(200 / 3)}


def test_the_endpoint_s_answers_score_by_record_id():
    """make evaluate's scoring (tasks.question_answering.response_scores) of one endpoint answer per record."""
    from tasks import question_answering

    records = [
        {"id": "a", "answers": {"text": ["Denver Broncos", "The Broncos"]}},
        {"id": "b", "answers": {"text": ["1889"]}},
        {"id": "c", "answers": {"text": ["blue"]}},
    ]
    responses = [{"answer": "Broncos", "score": 0.9}, {"answer": "in 1889", "score": 0.5}, {"answer": "red"}]
    scores = question_answering.response_scores(records, responses, None)
    # a: EM 1; b: EM 0, F1 2/3; c: 0
    assert scores == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 * (1 + 2 / 3) / 3)}


def postprocess_predictions(*args, **kwargs) -> dict[str, str]:
    return {example_id: span.text for example_id, span in best_spans(*args, **kwargs).items()}


def test_postprocessing_picks_the_best_valid_span_across_windows():
    context = "Gustave Eiffel built the tower in 1889."
    examples = [{"id": "q", "context": context}]
    # Window 0: tokens 0-1 question (None), tokens 2.. context; window 1 overlaps.
    offsets0 = [None, None, [0, 7], [8, 14], [15, 20], None]
    offsets1 = [None, None, [21, 24], [25, 30], [34, 38], None]
    features = [{"example_id": "q", "offset_mapping": offsets0}, {"example_id": "q", "offset_mapping": offsets1}]
    start = np.full((2, 6), -10.0)
    end = np.full((2, 6), -10.0)
    start[0, 2], end[0, 3] = 5.0, 5.0  # "Gustave Eiffel": score 10
    start[1, 4], end[1, 4] = 6.0, 6.0  # "1889": score 12, the best
    start[1, 0], end[1, 0] = 50.0, 50.0  # CLS / question tokens are never answers
    start[0, 5], end[0, 5] = 60.0, 60.0  # final [SEP] neither
    assert postprocess_predictions(examples, features, start, end) == {"q": "1889"}


def test_postprocessing_never_returns_a_span_that_ends_before_it_starts():
    context = "a b c"
    features = [{"example_id": "q", "offset_mapping": [[0, 1], [2, 3], [4, 5]]}]
    start = np.array([[-100.0, -50.0, 9.0]])
    end = np.array([[9.0, -50.0, -60.0]])  # best pair (2, 0) is invalid; best valid is (2, 2) = -51
    assert postprocess_predictions([{"id": "q", "context": context}], features, start, end) == {"q": "c"}


def test_postprocessing_respects_max_answer_length():
    context = "a b c d e"
    offsets = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    features = [{"example_id": "q", "offset_mapping": offsets}]
    start = np.array([[9.0, 0, 0, 0, 0]])
    end = np.array([[0, 0, 0, 0, 9.0]])
    assert postprocess_predictions([{"id": "q", "context": context}], features, start, end, max_answer_length=2) != (
        {"q": context}
    )
    assert postprocess_predictions([{"id": "q", "context": context}], features, start, end) == {"q": context}


def test_best_span_carries_its_offsets_and_probability_over_context_tokens():
    context = "a b"
    features = [{"example_id": "q", "offset_mapping": [None, [0, 1], [2, 3], None]}]
    start = np.array([[50.0, np.log(3.0), 0.0, 50.0]])  # question/[SEP] logits never count
    end = np.array([[50.0, 0.0, np.log(3.0), 50.0]])
    [(example_id, span)] = best_spans([{"id": "q", "context": context}], features, start, end).items()
    assert example_id == "q"
    assert (span.text, span.start, span.end) == ("a b", 0, 3)
    assert span.score == pytest.approx(0.75 * 0.75)  # softmax over the two context tokens, start x end
    assert best_spans([{"id": "none", "context": context}], features, start, end)["none"] == Span("", 0, 0, 0.0)
