"""Load the base model for question answering and say plainly which of its weights are new."""

from __future__ import annotations

import logging

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


def load_question_answering_model(name_or_path: str, log: logging.Logger) -> PreTrainedModel:
    """The model with its QA head, in float32; transformers' own load report (UNEXPECTED/MISSING keys) stays in the
    log.

    A base encoder has no QA head, so the report lists the head as MISSING: that is expected, and one plain
    sentence says so. Missing weights outside the head mean the base model is not what was meant: a warning.
    """
    model, loading = AutoModelForQuestionAnswering.from_pretrained(
        name_or_path, output_loading_info=True, **FLOAT32_WEIGHTS
    )
    missing = sorted(loading["missing_keys"])
    if any(key.startswith(QA_HEAD) for key in missing):
        log.info("the question-answering head is new (the base model has none): this run trains it, as expected")
    others = [key for key in missing if not key.startswith(QA_HEAD)]
    if others:
        log.warning(
            "%d weights of the model are not in %s and start from random values (%s): is it the intended base model?",
            len(others),
            name_or_path,
            ", ".join(others[:5]) + (", ..." if len(others) > 5 else ""),
        )
    return model
