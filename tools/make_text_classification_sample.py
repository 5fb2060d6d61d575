"""Generate the bundled text-classification sample (customer messages routed to a team; written for this project,
CC0).

    python -m tools.make_text_classification_sample data/sample-text-classification

Deterministic: the same seed writes the same files. Some records are pairs (`text` a subject line, `text_pair` the
message). Train labels are names, validation labels their indices (both forms `datasets`' ClassLabel data takes);
the manifest is a manifest v2-style object with the task and the label names in index order.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from tasks import text_classification

from config.paths import PROJECT_ROOT
from tools.task_samples import write_task_sample

LABEL_NAMES = ("billing", "shipping", "technical", "account")
PAIR_EVERY = 6  # one record in six is a (subject, message) pair
PRODUCTS = ["the blender", "my headphones", "the desk lamp", "the coffee grinder", "the router", "my keyboard"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
AMOUNTS = ["12.99", "24.50", "39.00", "7.45", "89.90", "15.20", "64.00"]
DAYS = ["two days", "a week", "ten days", "three weeks", "five days"]
APPS = ["the mobile app", "the website", "the desktop app", "the browser extension"]
ERRORS = ["error 500", "a blank screen", "a spinning wheel", "error code E42", "a timeout message"]
MESSAGES = {
    "billing": [
        "I was charged {amount} twice for my order in {month}.",
        "Why does my invoice for {month} show {amount} more than the price?",
        "Please refund the {amount} you took for {product}: I cancelled it.",
        "My credit card was billed {amount} after I ended the subscription.",
        "Can I get a receipt for the {amount} payment I made in {month}?",
        "The discount code was not applied and I paid {amount} in full.",
        "I see a charge of {amount} I do not recognise on my statement.",
        "How do I change the card you bill for my monthly plan?",
    ],
    "shipping": [
        "My parcel with {product} has not arrived after {days}.",
        "The tracking number for {product} shows no update for {days}.",
        "Can you deliver {product} to a different address?",
        "The courier left {product} at the wrong house.",
        "{product} arrived with the box crushed and the contents broken.",
        "When will {product} ship? I ordered it {days} ago.",
        "Do you ship to Norway, and how long does delivery take?",
        "Only half of my order came; {product} is missing from the package.",
    ],
    "technical": [
        "{app} shows {error} every time I open it.",
        "{product} will not connect to {app} since the last update.",
        "After installing the update, {app} crashes with {error}.",
        "The firmware update for {product} fails halfway through.",
        "{app} freezes on {error} when I try to pair {product}.",
        "Bluetooth keeps dropping between {product} and my phone.",
        "I get {error} when I sync {product} with {app}.",
        "{product} restarts by itself and {app} cannot find it.",
    ],
    "account": [
        "I cannot log in to {app}: it says my password is wrong.",
        "Please delete my account and all my personal data.",
        "How do I change the email address on my profile?",
        "I never received the verification email to activate my account.",
        "Someone else may have signed in to my account from {app}.",
        "Can I merge my two accounts into one profile?",
        "The password reset link from {app} has expired.",
        "How do I turn on two-factor authentication for my login?",
    ],
}
SUBJECTS = {
    "billing": ["Wrong charge", "Refund request", "Invoice question", "Payment problem"],
    "shipping": ["Where is my order?", "Delivery problem", "Parcel not arrived", "Address change"],
    "technical": ["App not working", "Device problem", "Update failed", "Connection issue"],
    "account": ["Login problem", "Profile change", "Account access", "Security question"],
}
OPENINGS = ["", "Hello. ", "Hi there. ", "Good morning. ", "Dear support team. "]
CLOSINGS = ["", " Thanks.", " Please help.", " Thank you in advance.", " This is urgent."]


def message(rng: random.Random, label: str) -> str:
    values = {
        "amount": rng.choice(AMOUNTS),
        "month": rng.choice(MONTHS),
        "product": rng.choice(PRODUCTS),
        "days": rng.choice(DAYS),
        "app": rng.choice(APPS),
        "error": rng.choice(ERRORS),
    }
    body = rng.choice(MESSAGES[label]).format(**values)
    return rng.choice(OPENINGS) + body[0].upper() + body[1:] + rng.choice(CLOSINGS)


def records(
    rng: random.Random, count: int, split: str, label_as_index: bool, seen: set[str]
) -> list[dict[str, object]]:
    """`count` messages not in `seen` (the other split's: no validation text is a training text), the labels
    taken in turn (balanced), every PAIR_EVERY-th a (subject, message) pair."""
    made: list[dict[str, object]] = []
    while len(made) < count:
        index = len(made)
        label = LABEL_NAMES[index % len(LABEL_NAMES)]
        text = message(rng, label)
        if text in seen:
            continue
        seen.add(text)
        record: dict[str, object] = {"id": f"{split}-{index:03d}"}
        if index % PAIR_EVERY == PAIR_EVERY - 1:
            record.update(text=rng.choice(SUBJECTS[label]), text_pair=text)
        else:
            record["text"] = text
        record["label"] = LABEL_NAMES.index(label) if label_as_index else label
        made.append(record)
    rng.shuffle(made)
    return made


def generate(out_dir: Path, seed: int = 33) -> None:
    write_task_sample(out_dir, text_classification, LABEL_NAMES, records, seed)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROJECT_ROOT / "data" / text_classification.SAMPLE_DATASET)
