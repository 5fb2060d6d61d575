"""Stage the operator's benchmark that the F1 gate scores, and print the pin for cdk.json (a release step).

    python -m tools.stage_benchmark --benchmark ./my-benchmark --name squad-holdout [--version v1] [--env prod]

The benchmark is a dataset folder in the uploads' format; its validation/ files are staged (JSON, JSON Lines or
CSV; every record valid for the pipeline's task, --task), then a manifest v2 (each file's version id, SHA-256 and
size, and the label names the folder's manifest.json declares), last, under
s3://<artifacts bucket>/benchmarks/<name>/<version>/. The printed pin carries those label names: the claim step
refuses an upload that declares others. A version is staged once: a new benchmark is a new version.
Run it as a principal that evaluation.benchmark.writers names (the bucket policy denies every other writer once
a benchmark is configured), then pin the printed values in cdk.json's environments.<env>.evaluation.benchmark and
redeploy. Keep the benchmark out of uploaders' reach: a model trained on it would grade itself again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from qa import benchmark

from tools.deployment import (
    ToolParser,
    add_pipeline_arguments,
    bucket_exists,
    check_name,
    fail,
    load_deployment,
    run_tool,
    settings_for,
)


def release_principal(sts: Any) -> str:
    """The caller as aws:PrincipalArn sees it: an assumed role's session ARN becomes its role's ARN (a role with a
    path must be given with its path in writers: the session ARN does not carry it)."""
    arn = str(sts.get_caller_identity()["Arn"])
    head, _, rest = arn.partition(":assumed-role/")
    if not rest:
        return arn
    return f"{head.replace(':sts::', ':iam::')}:role/{rest.split('/', 1)[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--benchmark", required=True, type=Path, help="a dataset folder; its validation/ is staged")
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", default="v1")
    add_pipeline_arguments(parser)
    args = parser.parse_args(argv)
    check_name("--name", args.name)
    check_name("--version", args.version)
    pipeline_task = settings_for(args.env, args.task).task
    try:
        _, declared = benchmark.check_folder(args.benchmark, pipeline_task)  # before any AWS call
    except ValueError as err:
        fail(f"--benchmark {args.benchmark}: {err}")
    deployment = load_deployment(args.env, args.task)
    bucket = deployment.bucket("artifacts")
    s3 = deployment.client("s3")
    if not bucket_exists(s3, bucket):
        fail(f"artifacts bucket s3://{bucket} does not exist: deploy the stacks first (make deploy ENV={args.env})")
    manifest_key = benchmark.manifest_key(args.name, args.version)
    if s3.list_objects_v2(Bucket=bucket, Prefix=benchmark.prefix(args.name, args.version)).get("KeyCount"):
        fail(
            f"s3://{bucket}/{benchmark.prefix(args.name, args.version)} is already staged: a benchmark version never "
            "changes once pinned; stage under another VERSION"
        )

    def put(key: str, body: bytes) -> str:
        print(f"  -> s3://{bucket}/{key}")
        return str(s3.put_object(Bucket=bucket, Key=key, Body=body)["VersionId"])

    version_id, sha256 = benchmark.stage(args.benchmark, args.name, args.version, put, pipeline_task)
    pin = {
        "name": args.name,
        "version": args.version,
        "manifest_version_id": version_id,
        "manifest_sha256": sha256,
        **({"label_names": list(declared.label_names)} if declared.label_names is not None else {}),
        "writers": [release_principal(deployment.client("sts"))],
    }
    print(f"staged: s3://{bucket}/{manifest_key} (version {version_id})")
    print(f"pin it as environments.{args.env}.evaluation.benchmark in cdk.json, then redeploy:")
    print(json.dumps(pin))
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
