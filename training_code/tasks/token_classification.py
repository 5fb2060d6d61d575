"""Token classification of words with IOB2 tags (`tokens`, `ner_tags`), e.g. named-entity recognition."""

from __future__ import annotations

NAME = "token-classification"
RESOURCE_NAME = "token-classification"
METRICS = ("precision", "recall", "f1")  # entity level, percent, as seqeval computes them (default mode, IOB2)
GATE_METRIC = "f1"
LABEL_COLUMNS = ("labels",)
USES_LABEL_NAMES = True
SAMPLE_DATASET = "sample-token-classification"
