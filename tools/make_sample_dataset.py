"""Generate the bundled sample dataset (fictional facts, written for this project; CC0).

    python -m tools.make_sample_dataset data/sample-squad

Deterministic: the same seed writes the same files. Train is JSON Lines, validation is SQuAD v1.1 JSON, so
both formats are exercised. The manifest is in SageMaker's ManifestFile format.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from qa.outputs import ANY_DATASETS_BUCKET, SPLITS, TRAIN_SPLIT, VALIDATION_SPLIT

from config.layout import DatasetLayout
from config.paths import SAMPLE_DATASET, SAMPLE_DATASET_NAME, SAMPLE_DATASET_VERSION

TRAIN_FILE, VALIDATION_FILE = f"{TRAIN_SPLIT}/train.jsonl", f"{VALIDATION_SPLIT}/validation.json"
SYLLABLES = ["ka", "lo", "mir", "ven", "tas", "ori", "bel", "dun", "sa", "rek", "ul", "pho", "zen", "iva", "tor"]
TRADES = ["glassblowing", "shipbuilding", "cheese making", "weaving", "pottery", "clockmaking", "tea growing"]
COLOURS = ["red", "green", "silver", "blue", "amber", "violet", "white"]
FACTS = [
    ("{town} lies on the banks of the river {river}.", "Which river does {town} lie on?", "{river}"),
    ("It was founded in {year} by {founder}.", "Who founded {town}?", "{founder}"),
    ("It was founded in {year} by {founder}.", "In which year was {town} founded?", "{year}"),
    ("Today about {people} people live there.", "How many people live in {town}?", "{people}"),
    ("The town is best known for {trade}.", "What is {town} best known for?", "{trade}"),
    (
        "Its flag shows a {colour} tower on a plain field.",
        "What colour is the tower on the flag of {town}?",
        "{colour}",
    ),
    ("The mayor, {mayor}, was elected in {election}.", "Who is the mayor of {town}?", "{mayor}"),
]


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def make_article(rng: random.Random, index: int) -> tuple[str, str, list[tuple[str, str, int]]]:
    """(title, context, [(question, answer, answer_start)]) for one fictional town."""
    values = {
        "town": _name(rng, 3),
        "river": _name(rng, 2),
        "founder": f"{_name(rng, 2)} {_name(rng, 3)}",
        "year": str(rng.randint(900, 1900)),
        "people": f"{rng.randint(2, 95)},{rng.randint(100, 999)}",
        "trade": rng.choice(TRADES),
        "colour": rng.choice(COLOURS),
        "mayor": f"{_name(rng, 2)} {_name(rng, 2)}",
        "election": str(rng.randint(1990, 2025)),
    }
    facts = FACTS[:]
    rng.shuffle(facts)
    sentences: list[str] = []
    qas = []
    for sentence_template, _, _ in facts:
        sentence = sentence_template.format(**values)
        if sentence not in sentences:
            sentences.append(sentence)
    context = f"{values['town']} is a small town. " + " ".join(sentences)
    for _, question_template, answer_template in facts:
        answer = answer_template.format(**values)
        start = context.find(answer)
        qas.append((question_template.format(**values), answer, start))
    return values["town"], context, qas


def generate(out_dir: Path, train_articles: int = 60, validation_articles: int = 12, seed: int = 7) -> None:
    rng = random.Random(seed)
    for split in SPLITS:
        (out_dir / split).mkdir(parents=True, exist_ok=True)
    with (out_dir / TRAIN_FILE).open("w", encoding="utf-8") as handle:
        for a in range(train_articles):
            title, context, qas = make_article(rng, a)
            for q, (question, answer, start) in enumerate(qas):
                record = {
                    "id": f"train-{a:03d}-{q}",
                    "title": title,
                    "context": context,
                    "question": question,
                    "answers": {"text": [answer], "answer_start": [start]},
                }
                handle.write(json.dumps(record) + "\n")
    data = []
    for a in range(validation_articles):
        title, context, qas = make_article(rng, a)
        data.append(
            {
                "title": title,
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": f"val-{a:03d}-{q}",
                                "question": question,
                                "answers": [{"text": answer, "answer_start": start}],
                            }
                            for q, (question, answer, start) in enumerate(qas)
                        ],
                    }
                ],
            }
        )
    (out_dir / VALIDATION_FILE).write_text(json.dumps({"version": "1.1", "data": data}, indent=1))
    datasets = DatasetLayout()
    manifest = datasets.manifest_body(
        ANY_DATASETS_BUCKET, datasets.prefix(SAMPLE_DATASET_NAME, SAMPLE_DATASET_VERSION), [TRAIN_FILE, VALIDATION_FILE]
    )
    (out_dir / datasets.manifest_name).write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE_DATASET)
