#!/usr/bin/env python3
"""Claim one uploaded manifest for one pipeline execution (processing job, the pipeline's first step).

S3 delivers events to EventBridge at least once, so one upload can start two executions. Each execution
writes a claim object named after the manifest's bucket, key and version with an S3 conditional write
(`If-None-Match: *`): exactly one write succeeds. The step writes claim.json (`duplicate` 0 or 1) for the
pipeline's condition, which skips every later step of a duplicate execution: no GPU time, no failure alarm.
https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html

Output: /opt/ml/processing/output/claim/claim.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from qa.cli import require_manifest_version, setup_logging

OUTPUT = "/opt/ml/processing/output/claim"
# Set by the local pipeline runner: S3 URIs are folders under it (s3://bucket/key -> <root>/bucket/key).
LOCAL_S3_ROOT = "LOCAL_S3_ROOT"
CONFLICT_RETRIES = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims-uri", required=True, help="s3://bucket/prefix where claims are written")
    parser.add_argument("--execution-id", required=True)
    parser.add_argument("--dataset-bucket", required=True)
    parser.add_argument("--manifest-key", required=True)
    parser.add_argument("--manifest-version", required=True)
    parser.add_argument("--output-dir", type=Path, default=Path(OUTPUT))
    return parser.parse_args(argv)


def claim_key(prefix: str, bucket: str, key: str, version: str) -> str:
    digest = hashlib.sha256(f"{bucket}\n{key}\n{version}".encode()).hexdigest()
    return f"{prefix.strip('/')}/{digest}.json"


def create_if_absent(bucket: str, key: str, body: bytes) -> bytes | None:
    """Write the object unless it exists; None when written, else the existing object's body."""
    local_root = os.environ.get(LOCAL_S3_ROOT)
    if local_root:
        path = Path(local_root) / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with os.fdopen(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY), "wb") as handle:
                handle.write(body)
            return None
        except FileExistsError:
            return path.read_bytes()
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3")
    attempt = 0
    while True:
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            return None
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code")
            if code == "PreconditionFailed":  # 412: the claim exists
                return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            # 409: a concurrent conditional write to the same key is in flight; S3 says to retry the write.
            if code != "ConditionalRequestConflict" or attempt == CONFLICT_RETRIES:
                raise
        time.sleep(0.5 * 2**attempt)
        attempt += 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = setup_logging()
    if require_manifest_version(args.manifest_version) is None:
        return 1
    claims_bucket, _, prefix = args.claims_uri.removeprefix("s3://").partition("/")
    key = claim_key(prefix, args.dataset_bucket, args.manifest_key, args.manifest_version)
    manifest = f"s3://{args.dataset_bucket}/{args.manifest_key} (version {args.manifest_version})"
    claim = {"execution_id": args.execution_id, "manifest": manifest}
    existing = create_if_absent(claims_bucket, key, json.dumps(claim).encode())
    owner = args.execution_id if existing is None else json.loads(existing)["execution_id"]
    # A retry of this step within the same execution finds its own claim: not a duplicate.
    duplicate = owner != args.execution_id
    if duplicate:
        log.warning("%s was already claimed by execution %s: this duplicate delivery stops here", manifest, owner)
    else:
        log.info("claimed %s for execution %s", manifest, owner)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    result = {"duplicate": int(duplicate), "claimed_by": owner, "manifest": manifest}
    (args.output_dir / "claim.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
