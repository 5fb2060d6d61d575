"""Extractive question answering (SQuAD v1.1 records): the task contract bound to the `qa` package's code."""

from __future__ import annotations

from typing import Any

NAME = "question-answering"
RESOURCE_NAME = "qa"  # the model package group <prefix>-qa-models, as before tasks existed
METRICS = ("exact_match", "f1")  # SQuAD v1.1's, percent
GATE_METRIC = "f1"
LABEL_COLUMNS = ("start_positions", "end_positions")
USES_LABEL_NAMES = False
SAMPLE_DATASET = "sample-squad"


def example_request(record: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's request for a validation record (inference.py: one {"question", "context"})."""
    return {"inputs": {"question": record["question"], "context": record["context"]}}


def describe_response(response: dict[str, Any], record: dict[str, Any]) -> str:
    """The demo's last lines: the record's question, then the registered model's answer beside the reference."""
    return (
        f"question ({record['id']}, validation set): {record['question']}\n"
        f'answer of the registered model: "{response["answer"]}" (score {response["score"]:.2f}; '
        f'reference: "{record["answers"]["text"][0]}")'
    )
