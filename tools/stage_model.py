"""Copy base model weights + tokenizer to the artifacts bucket, where the pipeline's BaseModelUri points.

    python -m tools.stage_model --model bert-large-uncased-whole-word-masking [--env dev]
    python -m tools.stage_model --model ./my-local-model --name my-model

Run it where the model hub is reachable (the training VPC has no internet). A local directory is uploaded as it
is, once its tokenizer is checked against its config.json (qa.model_folder.tokenizer_mismatch). The folder is staged
under base-models/<--name, default: the configured model.base_model>/; a model other than the configured one goes
under its own --name, and runs use it with PARAMS="BaseModelUri=s3://<artifacts>/base-models/<name>/".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from qa.model_folder import checked_model, download, local_model_dir, model_files

from config.loader import DEFAULT_ENV
from tools.deployment import (
    Deployment,
    ToolParser,
    bucket_exists,
    check_name,
    fail,
    load_deployment,
    run_tool,
)

# Size words in BERT-family model names and the hidden size they stand for (bert-base: 768, bert-large: 1024).
SIZE_HIDDEN = {"base": 768, "large": 1024}
# Model families whose name says the architecture; longer names first ("distilbert" also contains "bert").
FAMILIES = ("xlm-roberta", "distilbert", "roberta", "deberta", "albert", "electra", "bert")


def config_mismatches(config: dict[str, Any], model_name: str) -> list[str]:
    """Where config.json contradicts the model name it is staged as.

    The rule: compare what the name states and the config records, and nothing else. `_name_or_path` (when
    recorded) must end with the name's last component; a family named in the name (bert, roberta, ...) must be
    the config's `model_type`; a size word ('base'/'large') must match `hidden_size` (768/1024).
    """
    short = model_name.rsplit("/", 1)[-1].lower()
    tokens = set(re.split(r"[-_./]", short))
    problems = []
    recorded = str(config.get("_name_or_path") or "").rstrip("/")
    if recorded and recorded.rsplit("/", 1)[-1].lower() != short:
        problems.append(f"_name_or_path is {recorded!r}")
    family = next((f for f in FAMILIES if f in short), None)
    model_type = str(config.get("model_type", ""))
    if family and model_type and not model_type.startswith(family):
        problems.append(f"model_type is {model_type!r}, not {family!r}")
    for word, hidden in SIZE_HIDDEN.items():
        if word in tokens and config.get("hidden_size") not in (None, hidden):
            problems.append(f"hidden_size is {config['hidden_size']}, not {hidden} ('{word}')")
    return problems


def staged_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    return [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for item in page.get("Contents", [])
    ]


def stage(model_dir: Path, bucket: str, prefix: str, s3: Any, replace: bool = False) -> list[str]:
    """Upload every model file under s3://bucket/prefix, so that the prefix holds exactly this model; returns
    the keys written. A prefix that already holds files is refused unless `replace`: then the files of the
    previous model that this one lacks are deleted after the upload (a mix of two models' shards or
    tokenizers would load as neither)."""
    before = staged_keys(s3, bucket, prefix)
    if before and not replace:
        fail(
            f"s3://{bucket}/{prefix} already holds {len(before)} file(s) of a staged model: pass --replace "
            "(REPLACE=1) to replace them, or stage under another --name"
        )
    keys = []
    for path in model_files(model_dir):
        key = f"{prefix}{path.relative_to(model_dir).as_posix()}"
        print(f"  {path.relative_to(model_dir)} -> s3://{bucket}/{key}")
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    stale = sorted(set(before) - set(keys))
    for start in range(0, len(stale), 1000):  # DeleteObjects takes at most 1,000 keys per request
        # https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in stale[start : start + 1000]]})
    if stale:
        print(f"  removed {len(stale)} file(s) of the previous model: {', '.join(k[len(prefix) :] for k in stale)}")
    return keys


def report_base_model_uri(deployment: Deployment, staged_uri: str) -> None:
    default = deployment.default_base_model_uri
    if staged_uri == default:
        print(f"staged: {staged_uri} (the pipeline's default BaseModelUri)")
        return
    print(f"staged: {staged_uri}")
    print(
        f"note: the pipeline's default BaseModelUri is {default}; to train on this model, pass "
        f'PARAMS="BaseModelUri={staged_uri}" to make upload-dataset or make start, or set '
        f"model.base_model_s3_uri={staged_uri} in cdk.json and redeploy"
    )


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--model", required=True, help="hub id or local directory")
    parser.add_argument("--name", help="folder name under base-models/ (default: settings' model.base_model)")
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--replace", action="store_true", help="replace the model already staged under --name")
    parser.add_argument(
        "--force", action="store_true", help="stage a config that contradicts the configured base model"
    )
    args = parser.parse_args(argv)

    if args.name is not None:
        check_name("--name", args.name)
    model_dir = local_model_dir(args.model)
    if model_dir is not None:
        checked_model(model_dir)  # refuse an incomplete or mismatched folder before any AWS call
    deployment = load_deployment(args.env)
    settings = deployment.settings
    name = args.name or settings.model.base_model
    bucket = deployment.bucket("artifacts")
    s3 = deployment.client("s3")
    if not bucket_exists(s3, bucket):
        fail(f"artifacts bucket s3://{bucket} does not exist: deploy the stacks first (make deploy ENV={args.env})")
    model_dir = model_dir or download(args.model)
    config = checked_model(model_dir)
    # Only a folder staged as the configured base model must be that model; another --name is any model.
    mismatches = config_mismatches(config, name) if name == settings.model.base_model else []
    if mismatches and not args.force:
        fail(
            f"{model_dir}/config.json contradicts the configured base model {name} ({'; '.join(mismatches)}): "
            "stage it with --name <its name>, set model.base_model in cdk.json, or pass --force (FORCE=1)"
        )
    if mismatches:
        print(f"warning: staging {model_dir} as {name} although {'; '.join(mismatches)} (--force)")
    prefix = f"{settings.layout.base_models}/{name}/"
    stage(model_dir, bucket, prefix, s3, replace=args.replace)
    report_base_model_uri(deployment, f"s3://{bucket}/{prefix}")
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
