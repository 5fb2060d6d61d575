"""Register a model that missed the F1 gate, without retraining: a person's recorded decision.

    make register EXECUTION=local-<id> REASON="..."     a local run's trained model, in the local registry
    make register PACKAGE=<arn> REASON="..."            a registered (say Rejected) package's model, again

The new package waits for manual approval (PendingManualApproval) and records the decision: who (your user
name locally, your AWS identity's ARN on AWS), when (UTC), why (REASON) and what it came from, in its
CustomerMetadataProperties and, on AWS, its ApprovalDescription. A local run's model is its RecordModel copy
(registry/<sha256>/model.tar.gz), as the pipeline registers it. Not in production: stacks/ defines no approval
role (no principal but the pipeline's may CreateModelPackage there), so a person's registration has none to use.
"""

from __future__ import annotations

import getpass
import sys
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from config.loader import DEFAULT_ENV
from config.paths import LOCAL_EXECUTION_PREFIX, LOCAL_RUNS
from local_runner.blobs import file_digest
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry, ModelPackage
from local_runner.runs import executions_dir, find_run
from local_runner.store import STORE_DIR, LocalObjectStore
from pipeline_steps import names
from tools.deployment import ToolParser, fail, load_deployment, run_tool, settings_for

PENDING = "PendingManualApproval"
PRODUCTION = "prod"
# CustomerMetadataProperties: at most 50 entries, keys of 1-128 and values of 1-256 characters, each a letter,
# number, separator (space) or one of `_.:/=+-@` (the pattern [\p{L}\p{Z}\p{N}_.:\/=+\-@]*); ApprovalDescription:
# at most 1024 characters. https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html
METADATA_VALUE_MAX = 256
METADATA_ENTRIES_MAX = 50
METADATA_PUNCTUATION = set("_.:/=+-@")
REGISTERED_BY, REGISTERED_AT, REASON, SOURCE = (
    "registered_by",
    "registered_at",
    "registration_reason",
    "registered_from",
)


def metadata_value_problem(value: str) -> str | None:
    """Why `value` cannot be a CustomerMetadataProperties value, or None."""
    if not 1 <= len(value) <= METADATA_VALUE_MAX:
        return f"has {len(value)} characters; a model package's metadata value has 1 to {METADATA_VALUE_MAX}"
    bad = sorted({c for c in value if unicodedata.category(c)[0] not in "LNZ" and c not in METADATA_PUNCTUATION})
    if bad:
        return f"has {''.join(bad)!r}: only letters, numbers, spaces and _.:/=+-@ may be stored"
    return None


def decision(who: str, reason: str, source: str) -> dict[str, str]:
    """The person's decision as CustomerMetadataProperties."""
    problem = metadata_value_problem(reason)
    if problem:
        fail(f"REASON {problem}")
    values = {
        REGISTERED_BY: who,
        REGISTERED_AT: datetime.now(UTC).isoformat(timespec="seconds"),
        REASON: reason,
        SOURCE: source,
    }
    for key, value in values.items():
        if (problem := metadata_value_problem(value)) is not None:
            fail(f"{key} {value!r} {problem}")
    return values


def register_local_run(work_dir: Path, group: str, execution_id: str, reason: str) -> ModelPackage:
    """A new package of the local run's trained model (RecordModel's registry copy)."""
    run = find_run(executions_dir(work_dir), execution_id)
    if run is None or run.record is None:
        fail(f"no local run {execution_id} with a record under {executions_dir(work_dir)}: pass one from make runs")
    record = run.record
    if record.model_package_arn:
        fail(f"local run {execution_id} registered {record.model_package_arn} already")
    store = LocalObjectStore(work_dir / STORE_DIR)
    if not record.model_data or not store.path(record.model_data).is_file():
        fail(f"local run {execution_id} ({run.status}) trained no model: nothing to register")
    bucket = record.model_data.removeprefix("s3://").split("/", 1)[0]
    copy = f"s3://{bucket}/registry/{file_digest(store.path(record.model_data))}/model.tar.gz"
    model_data = copy if store.path(copy).is_file() else record.model_data
    metadata = decision(getpass.getuser(), reason, record.execution_arn)
    metadata[names.MODEL_METADATA_EXECUTION_ARN] = record.execution_arn
    registry = LocalModelRegistry(work_dir / REGISTRY_FILE)
    return registry.register(group, PENDING, model_data, record.metrics, execution_id, metadata)


def register_local_package(work_dir: Path, arn: str, reason: str) -> ModelPackage:
    """A new package of a local package's model, in its group."""
    registry = LocalModelRegistry(work_dir / REGISTRY_FILE)
    source = registry.package(arn)
    if source is None:
        fail(f"no local model package {arn} in {work_dir / REGISTRY_FILE}")
    metadata = {**source.metadata, **decision(getpass.getuser(), reason, arn)}
    return registry.register(source.group, PENDING, source.model_data, source.metrics, source.execution_id, metadata)


def register_aws_package(sagemaker: Any, caller_arn: str, arn: str, reason: str) -> str:
    """CreateModelPackage of a package's model (its inference specification, metrics and metadata) as a new
    version of its group, PendingManualApproval, with the decision; the new package's ARN."""
    source = sagemaker.describe_model_package(ModelPackageName=arn)
    metadata = {**source.get("CustomerMetadataProperties", {}), **decision(caller_arn, reason, arn)}
    request: dict[str, Any] = {
        "ModelPackageGroupName": source["ModelPackageGroupName"],
        "InferenceSpecification": source["InferenceSpecification"],
        "ModelApprovalStatus": PENDING,
        "CustomerMetadataProperties": metadata,
        "ModelPackageDescription": f"registered by hand from {arn.rsplit('/', 2)[-2]}/{arn.rsplit('/', 1)[-1]}",
    }
    if "ModelMetrics" in source:
        request["ModelMetrics"] = source["ModelMetrics"]
    if len(metadata) > METADATA_ENTRIES_MAX:
        fail(f"{arn}: with the decision, {len(metadata)} metadata properties; a package has at most 50")
    created = sagemaker.create_model_package(**request)
    # ApprovalDescription (at most 1024 characters) is UpdateModelPackage's, beside the status it explains.
    # The metadata again: an update without it keeps it on AWS, but moto 5 clears it.
    sagemaker.update_model_package(
        ModelPackageArn=created["ModelPackageArn"],
        ModelApprovalStatus=PENDING,
        ApprovalDescription=reason,
        CustomerMetadataProperties=metadata,
    )
    return str(created["ModelPackageArn"])


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--execution", help="a local run (local-<id>) whose model missed the gate")
    source.add_argument("--package", help="a model package ARN (local or AWS) whose model is registered again")
    parser.add_argument("--reason", required=True, help="why (kept in the package's metadata)")
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
    )
    args = parser.parse_args(argv)
    if args.env == PRODUCTION:
        fail(
            "register is not for production: stacks/ defines no approval role, and only the pipeline may create "
            "model packages there; register in dev, or train again in prod"
        )
    settings = settings_for(args.env)
    if args.execution is not None:
        if not args.execution.startswith(LOCAL_EXECUTION_PREFIX):
            fail(f"--execution {args.execution!r}: only a local run (local-<id>); on AWS pass PACKAGE=<arn>")
        package = register_local_run(args.work_dir, settings.model_package_group_name, args.execution, args.reason)
    elif ":local:" in args.package:
        package = register_local_package(args.work_dir, args.package, args.reason)
    else:
        deployment = load_deployment(args.env)
        caller = deployment.session.client("sts", region_name=deployment.region).get_caller_identity()["Arn"]
        arn = register_aws_package(deployment.client("sagemaker"), caller, args.package, args.reason)
        print(f"registered {arn} ({PENDING}): approve or reject it in SageMaker Studio or with UpdateModelPackage")
        return 0
    print(f"registered {package.arn} ({package.approval_status}), model {package.model_data}")
    print(f"  decision: {package.metadata[REGISTERED_BY]} at {package.metadata[REGISTERED_AT]}: {args.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
