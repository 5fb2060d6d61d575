"""A local job's console output leaves out library noise; its log file keeps every line."""

from __future__ import annotations

import io
import logging
import os
import sys

from local_runner.demo_models import build_tiny_model
from local_runner.jobs import _stream


def transformers_load_report(tmp_path) -> str:
    """What transformers itself logs when a base encoder is loaded for QA (UNEXPECTED pooler, MISSING head)."""
    from transformers import AutoModelForQuestionAnswering

    base = build_tiny_model(tmp_path / "base")
    capture = logging.StreamHandler(io.StringIO())
    library_logger = logging.getLogger("transformers")
    level = library_logger.level
    library_logger.addHandler(capture)
    library_logger.setLevel(logging.WARNING)
    try:
        AutoModelForQuestionAnswering.from_pretrained(str(base))
    finally:
        library_logger.removeHandler(capture)
        library_logger.setLevel(level)
    return capture.stream.getvalue()


def test_console_leaves_out_progress_bars_and_load_reports_and_the_log_keeps_them(tmp_path, capfd):
    report = transformers_load_report(tmp_path)
    assert "LOAD REPORT" in report and "MISSING" in report and "UNEXPECTED" in report
    bar = "\rLoading weights:   0%|          | 0/39 [00:00<?, ?it/s]\rLoading weights: 100%|###| 39/39 [00:00<00:00]\n"
    # As seen with two ranks: one rank's unfinished progress bar, then the other rank's report on that line.
    unfinished_bar = "\rLoading weights:   0%|          | 0/101 [00:00<?, ?it/s]"
    job = tmp_path / "job.py"
    job.write_text(
        "import sys\n"
        "print('step=1 loss=1.0', flush=True)\n"
        f"sys.stderr.write({bar!r})\n"
        f"sys.stderr.write({unfinished_bar + report!r})\n"
        "sys.stderr.write('error: train/train.jsonl:line 6 field=answers\\n')\n"
    )
    capfd.readouterr()  # the in-process load above drew its own progress bar
    console: list[str] = []
    log_path = tmp_path / "job.log"
    assert _stream([sys.executable, str(job)], dict(os.environ), tmp_path, log_path, console.append) == 0
    err = capfd.readouterr().err
    assert "    | step=1 loss=1.0" in console
    assert "    | error: train/train.jsonl:line 6 field=answers" in err
    for noise in ("Loading weights", "LOAD REPORT", "UNEXPECTED", "MISSING", "qa_outputs"):
        assert noise not in err and noise not in "\n".join(console)
    assert any(line.startswith("    full job log (") and str(log_path) in line for line in console)
    logged = log_path.read_text()
    for line in ("step=1 loss=1.0", "Loading weights: 100%", "LOAD REPORT", "qa_outputs.weight", "error: train/"):
        assert line in logged
