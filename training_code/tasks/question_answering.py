"""Extractive question answering (SQuAD v1.1 records): the task contract bound to the `qa` package's code."""

from __future__ import annotations

NAME = "question-answering"
RESOURCE_NAME = "qa"  # the model package group <prefix>-qa-models, as before tasks existed
METRICS = ("exact_match", "f1")  # SQuAD v1.1's, percent
GATE_METRIC = "f1"
LABEL_COLUMNS = ("start_positions", "end_positions")
USES_LABEL_NAMES = False
SAMPLE_DATASET = "sample-squad"
