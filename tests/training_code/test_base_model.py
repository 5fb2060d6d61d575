"""Loading the base model for QA says in plain words that the head is new, and warns about anything else."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch
from qa.answering import QuestionAnswerer
from qa.base_model import load_question_answering_model

from config.paths import TRAINING_CODE
from local_runner.demo_models import build_tiny_model

log = logging.getLogger("qa")


def qa_messages(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "qa"]


def test_a_base_encoder_gets_a_new_head_said_once(tiny_model_dir, caplog):
    with caplog.at_level(logging.INFO, logger="qa"):
        model = load_question_answering_model(str(tiny_model_dir), log)
    assert type(model).__name__ == "BertForQuestionAnswering"
    [(level, message)] = qa_messages(caplog)
    assert level == logging.INFO
    assert message.startswith("the question-answering head is new")


def test_a_model_that_has_its_head_loads_without_a_word(tiny_model_dir, tmp_path, caplog):
    load_question_answering_model(str(tiny_model_dir), log).save_pretrained(tmp_path)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="qa"):
        load_question_answering_model(str(tmp_path), log)
    assert qa_messages(caplog) == []


def test_encoder_weights_missing_from_the_base_model_are_a_warning(tiny_model_dir, tmp_path, caplog):
    shutil.copytree(tiny_model_dir, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] += 1  # a layer the checkpoint does not have
    (tmp_path / "config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.INFO, logger="qa"):
        load_question_answering_model(str(tmp_path), log)
    warnings = [message for level, message in qa_messages(caplog) if level == logging.WARNING]
    assert len(warnings) == 1
    assert f"encoder.layer.{config['num_hidden_layers'] - 1}." in warnings[0]
    assert "is it the intended base model?" in warnings[0]


def test_library_reports_are_printed_once_even_where_ci_is_set(tmp_path):
    """transformers propagates its records to the root logger when CI=true: each report would then be printed
    twice, once on stdout where the local runner does not filter library reports."""
    script = (
        "from qa.cli import setup_logging; setup_logging(True); "
        "from transformers.utils import logging; logging.get_logger('transformers.modeling_utils').warning('REPORT')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=TRAINING_CODE,
        env={**os.environ, "CI": "true"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "REPORT" not in result.stdout
    assert result.stderr.count("REPORT") == 1


def checkpoint_dtypes(model_dir) -> set[torch.dtype]:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
        return {weights.get_tensor(key).dtype for key in weights.keys()}  # noqa: SIM118 (no __iter__)


@pytest.mark.parametrize("saved_dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_checkpoint_trains_and_serves_in_float32(saved_dtype, tmp_path):
    """transformers 5 loads a checkpoint in its own dtype by default (dtype="auto"): half-precision master weights
    would make fp16's GradScaler refuse to unscale, and evaluation and the endpoint would compute in another
    precision than float32."""
    from transformers import AutoModel, AutoTokenizer

    base = build_tiny_model(tmp_path / "base", dropout=0.0)
    AutoModel.from_pretrained(str(base)).to(saved_dtype).save_pretrained(base)
    assert checkpoint_dtypes(base) == {saved_dtype}
    model = load_question_answering_model(str(base), log)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}

    trained = tmp_path / "trained"
    model.to(saved_dtype).save_pretrained(trained)
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(trained)
    assert checkpoint_dtypes(trained) == {saved_dtype}
    served = QuestionAnswerer(trained, "cpu").model
    assert {parameter.dtype for parameter in served.parameters()} == {torch.float32}
