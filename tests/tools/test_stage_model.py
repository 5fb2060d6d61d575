"""tools.stage_model as a user meets it: run as a command against the moto server (see conftest.py)."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest
from qa.model_folder import ModelFolderError

from tests.tools.conftest import BERT_LARGE_CONFIG, assert_one_line_error, run_cli, small_model
from tests.training_code.test_model_folder import tokenizer_folder
from tools.stage_model import config_mismatches, model_files

CONFIGURED = "bert-large-uncased-whole-word-masking"


def test_missing_local_directory(aws):
    line = assert_one_line_error(run_cli("tools.stage_model", "--model", "./no-such-model", env=aws), "./no-such-model")
    assert "no such directory" in line and "hub id" in line


def test_unreachable_model_hub(deployed, deployed_env):
    with socket.socket() as closed:  # a port nothing listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {**deployed_env, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": "/nonexistent/hf-home"}
    line = assert_one_line_error(run_cli("tools.stage_model", "--model", "org/some-model", env=env), "org/some-model")
    assert f"http://127.0.0.1:{port}" in line and "where the hub is reachable" in line


def test_missing_artifacts_bucket(aws, tmp_path):
    model = small_model(tmp_path / "m", BERT_LARGE_CONFIG)
    line = assert_one_line_error(run_cli("tools.stage_model", "--model", str(model), env=aws), "artifacts bucket")
    assert "does not exist" in line and "make deploy ENV=dev" in line


def test_configured_model_is_staged_at_the_default_base_model_uri(deployed, deployed_env, tmp_path):
    model = small_model(tmp_path / "m", {**BERT_LARGE_CONFIG, "_name_or_path": CONFIGURED})
    result = run_cli("tools.stage_model", "--model", str(model), env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip().splitlines()[-1]
        == f"staged: {deployed.base_model_uri} (the pipeline's default BaseModelUri)"
    )
    assert "warning" not in result.stdout
    keys = deployed.client("s3").list_objects_v2(Bucket=deployed.artifacts_bucket)["Contents"]
    assert {k["Key"] for k in keys} == {
        f"base-models/{CONFIGURED}/{name}"
        for name in ("config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors")
    }


def test_another_name_prints_the_base_model_uri_override(deployed, deployed_env, tmp_path):
    model = small_model(tmp_path / "m", {"model_type": "bert", "hidden_size": 384})
    result = run_cli("tools.stage_model", "--model", str(model), "--name", "all-minilm", env=deployed_env)
    assert result.returncode == 0, result.stderr
    staged = f"s3://{deployed.artifacts_bucket}/base-models/all-minilm/"
    assert f"staged: {staged}\n" in result.stdout
    assert "the pipeline's default BaseModelUri)" not in result.stdout
    assert f"BaseModelUri={staged}" in result.stdout


def test_a_different_model_staged_as_the_configured_one_is_refused_unless_forced(
    deployed, deployed_env, pretrained_dir, tmp_path
):
    minilm = small_model(tmp_path / "m", json.loads((pretrained_dir / "config.json").read_text()))
    line = assert_one_line_error(
        run_cli("tools.stage_model", "--model", str(minilm), env=deployed_env),
        f"contradicts the configured base model {CONFIGURED}",
        "--force",
    )
    assert "_name_or_path is 'nreimers/MiniLM-L6-H384-uncased'" in line
    assert "hidden_size is 384, not 1024 ('large')" in line
    assert deployed.client("s3").list_objects_v2(Bucket=deployed.artifacts_bucket)["KeyCount"] == 0

    forced = run_cli("tools.stage_model", "--model", str(minilm), "--force", env=deployed_env)
    assert forced.returncode == 0, forced.stderr
    assert next(line for line in forced.stdout.splitlines() if line.startswith("warning:")).endswith("(--force)")


def staged_names(deployed, name: str) -> set[str]:
    prefix = f"base-models/{name}/"
    listing = deployed.client("s3").list_objects_v2(Bucket=deployed.artifacts_bucket, Prefix=prefix)
    return {item["Key"].removeprefix(prefix) for item in listing.get("Contents", [])}


def test_a_second_model_under_one_name_is_refused_or_replaces_the_first_entirely(deployed, deployed_env, tmp_path):
    first = small_model(tmp_path / "first", {"model_type": "bert", "hidden_size": 384})
    (first / "pytorch_model-00002-of-00002.bin").write_bytes(b"\0")  # a shard the second model does not have
    stage = ("tools.stage_model", "--name", "mini", "--model")
    assert run_cli(*stage, str(first), env=deployed_env).returncode == 0
    second = small_model(tmp_path / "second", {"model_type": "bert", "hidden_size": 256})
    assert_one_line_error(run_cli(*stage, str(second), env=deployed_env), "already holds 5 file(s)", "--replace")

    result = run_cli(*stage, str(second), "--replace", env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert "removed 1 file(s) of the previous model: pytorch_model-00002-of-00002.bin" in result.stdout
    assert staged_names(deployed, "mini") == {p.name for p in second.iterdir()}
    config = deployed.client("s3").get_object(Bucket=deployed.artifacts_bucket, Key="base-models/mini/config.json")
    assert json.loads(config["Body"].read())["hidden_size"] == 256


@pytest.mark.parametrize(
    ("config", "name", "expected"),
    [
        ({"model_type": "bert", "hidden_size": 1024}, CONFIGURED, []),
        ({"_name_or_path": f"google/{CONFIGURED}", "model_type": "bert", "hidden_size": 1024}, CONFIGURED, []),
        ({"model_type": "roberta", "hidden_size": 768}, "bert-base-uncased", ["model_type is 'roberta', not 'bert'"]),
        ({"model_type": "distilbert", "hidden_size": 768}, "distilbert-base-uncased", []),
        ({"model_type": "bert", "hidden_size": 384}, "all-minilm", []),  # the name states nothing checkable
    ],
)
def test_config_mismatch_rule(config, name, expected):
    assert config_mismatches(config, name) == expected


def test_a_folder_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(ModelFolderError, match=r"lacks weights \(\*.safetensors or \*.bin\)"):
        model_files(tmp_path)


def test_files_in_subfolders_do_not_make_a_model(tmp_path):
    """`from_pretrained` reads config, tokenizer and weights from the folder itself, not from subfolders."""
    small_model(tmp_path / "nested" / "1_Pooling", BERT_LARGE_CONFIG)
    with pytest.raises(ModelFolderError, match=r"lacks config\.json, tokenizer"):
        model_files(tmp_path / "nested")


def test_unknown_model_id(deployed, deployed_env):
    """A local stand-in hub that answers as huggingface.co does for a model id it does not know (or may not
    show): 401 with X-Error-Code RepoNotFound. The message says to check the model id."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "Repository not found"}')

        do_HEAD = do_GET

        def log_message(self, *args) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound) as hub:
        threading.Thread(target=hub.serve_forever, daemon=True).start()
        env = {**deployed_env, "HF_ENDPOINT": f"http://127.0.0.1:{hub.server_address[1]}", "HF_HOME": "/nonexistent/hf"}
        result = run_cli("tools.stage_model", "--model", "org/no-such-model", env=env)
        hub.shutdown()
    line = assert_one_line_error(result, "has no model 'org/no-such-model' you may read")
    assert "check the model id" in line and "HF_TOKEN" in line


def test_a_folder_name_outside_the_rules_is_one_line(aws, tmp_path):
    model = small_model(tmp_path / "m", BERT_LARGE_CONFIG)
    result = run_cli("tools.stage_model", "--model", str(model), "--name", "../other", env=aws)
    assert_one_line_error(result, "--name '../other' must start with a letter or a digit")


def test_a_mismatched_tokenizer_is_refused_before_any_aws_call(aws, tmp_path):
    model = tokenizer_folder(tmp_path / "m", ["[PAD]", "a", "b"], {"model_type": "bert", "vocab_size": 2})
    line = assert_one_line_error(run_cli("tools.stage_model", "--model", str(model), env=aws), "is not this model's")
    assert "vocab_size 2" in line
