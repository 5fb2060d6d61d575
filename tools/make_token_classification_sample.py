"""Generate the bundled token-classification sample (short news-like sentences about invented people, organisations
and places, IOB2 tags; written for this project, CC0).

    python -m tools.make_token_classification_sample data/sample-token-classification

Deterministic: the same seed writes the same files. Train tags are names, validation tags their indices; the
manifest is a manifest v2-style object with the task and the label names in index order.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from tasks import token_classification

from config.paths import PROJECT_ROOT
from tools.task_samples import write_task_sample

LABEL_NAMES = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
ENTITIES = {
    "PER": ["Ines Marrow", "Tobin Vael", "Mara Quell", "Osric Dunmere", "Lena Farrow", "Kasim Orle", "Petra Ilsen"],
    "ORG": ["Vantor Labs", "Quillan Foods", "Brightmoor Bank", "Ostrel Group", "Halden Motors", "Nerio"],
    "LOC": ["Karvik", "Port Elmsby", "Dunhollow", "Sarrow Bay", "Veltane", "New Orlis"],
}
TEMPLATES = [
    "{PER} joined {ORG} in {LOC} last week .",
    "{ORG} opened a new office in {LOC} .",
    "{PER} said {ORG} will hire more staff .",
    "Police in {LOC} questioned {PER} on Monday .",
    "{PER} met {PER} at the {ORG} summit in {LOC} .",
    "Shares of {ORG} rose after {PER} spoke .",
    "Floods hit {LOC} and nearby {LOC} overnight .",
    "{PER} leads {ORG} , based in {LOC} .",
]


def sentence(rng: random.Random) -> dict[str, list[str]]:
    tokens: list[str] = []
    tags: list[str] = []
    for part in rng.choice(TEMPLATES).split():
        if part.startswith("{"):
            kind = part[1:-1]
            words = rng.choice(ENTITIES[kind]).split()
            tokens += words
            tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(words) - 1)
        else:
            tokens.append(part)
            tags.append("O")
    return {"tokens": tokens, "ner_tags": tags}


def records(rng: random.Random, count: int, split: str, as_index: bool, seen: set[str]) -> list[dict[str, object]]:
    """`count` sentences not in `seen` (no validation sentence is a training one)."""
    made: list[dict[str, object]] = []
    while len(made) < count:
        made_sentence = sentence(rng)
        key = " ".join(made_sentence["tokens"])
        if key in seen:
            continue
        seen.add(key)
        tags = [LABEL_NAMES.index(tag) for tag in made_sentence["ner_tags"]] if as_index else made_sentence["ner_tags"]
        made.append({"id": f"{split}-{len(made):03d}", "tokens": made_sentence["tokens"], "ner_tags": tags})
    return made


def generate(out_dir: Path, seed: int = 33) -> None:
    write_task_sample(out_dir, token_classification, LABEL_NAMES, records, seed)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROJECT_ROOT / "data" / token_classification.SAMPLE_DATASET)
