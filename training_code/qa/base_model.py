"""Load the base model with a task head and say plainly which of its weights are new."""

from __future__ import annotations

import logging
from typing import Any

import torch
import transformers
from packaging.version import Version
from transformers import AutoModelForQuestionAnswering, PreTrainedModel

QA_HEAD = "qa_outputs."  # the span-prediction layer that AutoModelForQuestionAnswering adds to an encoder
# `from_pretrained`'s keyword for the weights' dtype: `dtype` from transformers 4.56 (which reads `torch_dtype` only
# for backward compatibility, with a deprecation warning), `torch_dtype` before (4.49, the SMDDP image's).
_DTYPE_KEYWORD = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
# Weights in float32 whatever dtype the checkpoint was saved in: transformers 5 defaults to dtype="auto", the
# checkpoint's own. Training keeps float32 master weights under mixed precision (fp16's GradScaler refuses to unscale
# half-precision gradients), and the endpoint serves the precision that evaluation scored.
FLOAT32_WEIGHTS: dict[str, torch.dtype] = {_DTYPE_KEYWORD: torch.float32}


def load_with_head(
    auto_class: Any, head: str, task_words: str, name_or_path: str, log: logging.Logger, **config: Any
) -> PreTrainedModel:
    """The model of `auto_class` (an AutoModelFor... class) with its task head (weights named `head`...), in float32,
    `config` passed on (num_labels, id2label, label2id); transformers' own load report (UNEXPECTED/MISSING keys)
    stays in the log.

    A base encoder has no task head, so the report lists the head as MISSING: that is expected, and one plain
    sentence says so. Missing weights outside the head mean the base model is not what was meant: a warning.
    """
    model, loading = auto_class.from_pretrained(name_or_path, output_loading_info=True, **FLOAT32_WEIGHTS, **config)
    missing = sorted(loading["missing_keys"])
    if any(key.startswith(head) for key in missing):
        log.info("the %s head is new (the base model has none): this run trains it, as expected", task_words)
    others = [key for key in missing if not key.startswith(head)]
    if others:
        log.warning(
            "%d weights of the model are not in %s and start from random values (%s): is it the intended base model?",
            len(others),
            name_or_path,
            ", ".join(others[:5]) + (", ..." if len(others) > 5 else ""),
        )
    return model


def load_question_answering_model(name_or_path: str, log: logging.Logger) -> PreTrainedModel:
    """The model with its QA head (`qa_outputs`), in float32 (load_with_head)."""
    return load_with_head(AutoModelForQuestionAnswering, QA_HEAD, "question-answering", name_or_path, log)
