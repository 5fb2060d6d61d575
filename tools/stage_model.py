"""Copy base model weights + tokenizer to the artifacts bucket, where the pipeline's BaseModelUri points.

    python -m tools.stage_model --model bert-large-uncased-whole-word-masking [--env dev]
    python -m tools.stage_model --model ./my-local-model --name my-model

Run it where the model hub is reachable (the training VPC has no internet). A local directory is uploaded
as it is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REQUIRED = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
SKIPPED_PARTS = {".git", ".cache", "onnx", "openvino", "coreml", "tf_model.h5", "flax_model.msgpack", "rust_model.ot"}


def model_files(model_dir: Path) -> list[Path]:
    """The files to stage; raises SystemExit when the folder is not a usable model."""
    if not (model_dir / "config.json").is_file():
        raise SystemExit(f"error: {model_dir} has no config.json: not a Hugging Face model folder")
    files = sorted(
        p
        for p in model_dir.rglob("*")
        if p.is_file()
        and not SKIPPED_PARTS.intersection(p.relative_to(model_dir).parts)
        and p.name not in SKIPPED_PARTS
    )
    if not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise SystemExit(f"error: {model_dir} has no weights (*.safetensors or *.bin)")
    if not any(p.name in TOKENIZER_FILES for p in files):
        raise SystemExit(f"error: {model_dir} has no tokenizer (tokenizer.json or vocab.txt)")
    return files


def stage(model_dir: Path, bucket: str, prefix: str, s3: Any) -> list[str]:
    """Upload every model file under s3://bucket/prefix; returns the keys written."""
    keys = []
    for path in model_files(model_dir):
        key = f"{prefix}{path.relative_to(model_dir).as_posix()}"
        print(f"  {path.relative_to(model_dir)} -> s3://{bucket}/{key}")
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    return keys


def resolve_model_dir(model: str) -> Path:
    local = Path(model)
    if local.is_dir():
        return local
    from huggingface_hub import snapshot_download  # needs hub access; never used in tests

    return Path(snapshot_download(model, allow_patterns=["*.json", "*.txt", "*.safetensors", "*.model"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or local directory")
    parser.add_argument("--name", help="folder name under base-models/ (default: settings' model.base_model)")
    parser.add_argument("--env", default="dev")
    args = parser.parse_args(argv)

    import boto3

    from tools.deployment import load_deployment

    session = boto3.Session()
    deployment = load_deployment(args.env, session)
    settings = deployment.settings
    prefix = f"{settings.layout.base_models}/{args.name or settings.model.base_model}/"
    bucket = deployment.bucket("artifacts")
    stage(resolve_model_dir(args.model), bucket, prefix, session.client("s3"))
    print(f"staged: s3://{bucket}/{prefix} (the pipeline's default BaseModelUri)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
