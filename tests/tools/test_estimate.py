"""make estimate: the table over instance choices, offline, from the configured model and SQuAD's size."""

from __future__ import annotations

import re

import tools.estimate
from tools.estimate import CHOICES, main


def test_table_lists_every_choice_with_time_cost_and_sources(capsys):
    assert main(["--env", "dev"]) == 0
    out = capsys.readouterr().out
    for name, count in CHOICES:
        assert re.search(rf"^{count} x {re.escape(name)} +\S", out, re.MULTILINE), f"{count} x {name}"
    assert "2 x ml.p4d.24xlarge (configured)" in out
    assert "LIST prices" in out and "us-east-1" in out
    assert "MFU 26.2% from NVIDIA DeepLearningExamples" in out
    rows = {match.group(): line for line in out.splitlines() if (match := re.match(r"\d+ x ml\.\S+", line))}
    # More p4d nodes cost more: data-parallel efficiency falls as the all-reduce crosses more nodes.
    costs = [float(re.findall(r"\$([0-9.,]+)", rows[f"{n} x ml.p4d.24xlarge"])[0]) for n in (1, 2, 4)]
    assert costs == sorted(costs)


def test_model_config_gives_the_shape_of_models_not_known_offline(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text('{"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "vocab_size": 100}')
    assert main(["--env", "dev", "--model-config", str(config)]) == 0
    assert "bert-large-uncased-whole-word-masking: 0 M matmul parameters" in capsys.readouterr().out


def test_measured_mfu_replaces_the_reference_for_its_gpu(tmp_path, monkeypatch, capsys):
    result = tmp_path / "gpu_throughput.json"
    result.write_text('{"gpu": "NVIDIA A100-SXM4-40GB", "mfu": 0.5}')
    monkeypatch.setattr(tools.estimate, "GPU_RESULT", result)
    assert main(["--env", "dev"]) == 0
    out = capsys.readouterr().out
    assert "ml.p4d.24xlarge: MFU 50.0% from MFU measured on NVIDIA A100-SXM4-40GB" in out
    assert "ml.p3.2xlarge: MFU 11.5% from NVIDIA" in out
