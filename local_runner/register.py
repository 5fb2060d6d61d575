"""Register a local model that missed the F1 gate, without retraining: a person's recorded decision.

    make register EXECUTION=local-<id> REASON="..."     a local run's trained model (its RecordModel copy)
    make register PACKAGE=<local arn> REASON="..."      a local package's model, again

The new package in the local registry waits for manual approval (PendingManualApproval) and records who (your
user name), when (UTC), why (REASON) and what it came from in its metadata, under the rules of
pipeline_steps/package_metadata.py. An AWS package: tools/register.py. Not in production (see there).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from config.paths import LOCAL_EXECUTION_PREFIX, LOCAL_RUNS
from local_runner.blobs import file_digest
from local_runner.errors import fail
from local_runner.evaluate import settings_for
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry, ModelPackage
from local_runner.store import STORE_DIR, LocalObjectStore
from pipeline_steps import names
from pipeline_steps.package_metadata import PENDING, REGISTERED_AT, REGISTERED_BY, decision
from reporting.local_runs import executions_dir, find_run

PRODUCTION = "prod"


def recorded_decision(reason: str, source: str) -> dict[str, str]:
    try:
        return decision(getpass.getuser(), reason, source)
    except ValueError as err:
        fail(str(err))


def register_local_run(work_dir: Path, env_name: str, execution_id: str, reason: str) -> ModelPackage:
    """A new package of the local run's trained model (RecordModel's registry copy), in the model package group of
    `env_name`'s pipeline of the task the run trained."""
    run = find_run(executions_dir(work_dir), execution_id)
    if run is None or run.record is None:
        fail(f"no local run {execution_id} with a record under {executions_dir(work_dir)}: pass one from make runs")
    record = run.record
    settings = settings_for(env_name, record.task)
    if record.model_package_arn:
        fail(f"local run {execution_id} registered {record.model_package_arn} already")
    store = LocalObjectStore(work_dir / STORE_DIR)
    if not record.model_data or not store.path(record.model_data).is_file():
        fail(f"local run {execution_id} ({run.status}) trained no model: nothing to register")
    metadata = recorded_decision(reason, record.execution_arn)
    bucket = record.model_data.removeprefix("s3://").split("/", 1)[0]
    copy = f"s3://{bucket}/{settings.layout.registry}/{file_digest(store.path(record.model_data))}/model.tar.gz"
    model_data = copy if store.path(copy).is_file() else record.model_data
    metadata[names.MODEL_METADATA_EXECUTION_ARN] = record.execution_arn
    registry = LocalModelRegistry(work_dir / REGISTRY_FILE)
    return registry.register(
        settings.model_package_group_name, PENDING, model_data, record.metrics, execution_id, metadata
    )


def register_local_package(work_dir: Path, arn: str, reason: str) -> ModelPackage:
    """A new package of a local package's model, in its group."""
    registry = LocalModelRegistry(work_dir / REGISTRY_FILE)
    source = registry.package(arn)
    if source is None:
        fail(f"no local model package {arn} in {work_dir / REGISTRY_FILE}")
    metadata = {**source.metadata, **recorded_decision(reason, arn)}
    return registry.register(source.group, PENDING, source.model_data, source.metrics, source.execution_id, metadata)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local_runner.register",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--execution", help="a local run (local-<id>) whose model missed the gate")
    source.add_argument("--package", help="a local model package ARN whose model is registered again")
    parser.add_argument("--reason", required=True, help="why (kept in the package's metadata)")
    parser.add_argument("--env", default="dev")
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
    )
    args = parser.parse_args(argv)
    if args.env == PRODUCTION:
        fail("register is not for production: stacks/ defines no approval role (see tools/register.py)")
    if args.execution is not None:
        if not args.execution.startswith(LOCAL_EXECUTION_PREFIX):
            fail(f"--execution {args.execution!r}: a local run (local-<id>)")
        package = register_local_run(args.work_dir, args.env, args.execution, args.reason)
    else:
        package = register_local_package(args.work_dir, args.package, args.reason)
    print(f"registered {package.arn} ({package.approval_status}), model {package.model_data}")
    print(f"  decision: {package.metadata[REGISTERED_BY]} at {package.metadata[REGISTERED_AT]}: {args.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
