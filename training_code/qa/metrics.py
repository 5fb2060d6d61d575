"""SQuAD v1.1 exact match and F1 with the official answer normalisation."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Iterable, Mapping

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1(prediction: str, truth: str) -> float:
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = collections.Counter(predicted) & collections.Counter(gold)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Mapping[str, str], gold_answers: Mapping[str, Iterable[str]]) -> dict[str, float]:
    """Percent EM and F1 over every gold question; each takes its best-matching gold answer."""
    if not gold_answers:
        raise ValueError("no gold answers to score against")
    em_total = f1_total = 0.0
    for question_id, truths in gold_answers.items():
        truths = list(truths)
        prediction = predictions.get(question_id, "")
        em_total += max(exact_match(prediction, t) for t in truths)
        f1_total += max(f1(prediction, t) for t in truths)
    count = len(gold_answers)
    return {"exact_match": 100.0 * em_total / count, "f1": 100.0 * f1_total / count}
