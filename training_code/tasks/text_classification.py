"""Sequence classification of single texts or text pairs (`text`, optional `text_pair`, `label`)."""

from __future__ import annotations

NAME = "text-classification"
RESOURCE_NAME = "text-classification"
METRICS = ("accuracy", "macro_f1")  # percent; macro-F1 over the manifest's label names, as scikit-learn's
GATE_METRIC = "macro_f1"
LABEL_COLUMNS = ("labels",)
USES_LABEL_NAMES = True
SAMPLE_DATASET = "sample-text-classification"
