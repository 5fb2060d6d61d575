"""Run the synthesized pipeline locally: `python -m local_runner --help`.

Reads the pipeline definition and the trigger rule from a cloud assembly (cdk.out/<env>), uploads a dataset
into a local stand-in for S3, turns the manifest upload into an S3 'Object Created' event, applies the
rule, and runs the execution it starts. When it registers a model, asks that model the first validation
question the way its SageMaker endpoint would answer. Exit code 0 only when all of this succeeded.

Your own data and model (`make train DATASET=<dir> MODEL=<folder or hub id> PARAMS="..."`):
    python -m local_runner --dataset <dir> --model <folder or hub id> --params "Epochs=3 F1Threshold=60"
stages the model under base-models/<its name>/ of the local store (its tokenizer checked against its config, as
`make stage-model` checks it) and trains it; a hub id is downloaded first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from types import ModuleType

from qa.data import load_dataset_files, read_manifest
from qa.model_folder import MODEL_CONFIG, checked_model, download, local_model_dir, own_name
from qa.outputs import (
    CLAIM_INPUT_URI,
    DATASET_NAME_CHARACTER,
    DATASET_NAME_FIRST,
    DATASET_NAME_MAX_LENGTH,
    PINNED_MANIFEST_FILE,
    VALIDATION_SPLIT,
)
from qa.task_file import read_task_file
from tasks import task as task_module

from config.layout import ArtifactLayout, DatasetLayout
from config.loader import DEFAULT_ENV
from config.paths import (
    LOCAL_EXECUTIONS,
    LOCAL_RUNS,
    SAMPLE_DATASET,
    assembly_dir,
    bundled_model_dir,
)
from local_runner.assembly import LocalAccount, find_pipeline_stack, load_synthesized_pipeline
from local_runner.blobs import BLOBS_DIR, BlobStore
from local_runner.demo_models import BUNDLED_MODEL_NAME, TINY_MODEL_NAME, build_tiny_model_in_job
from local_runner.errors import InvocationFailed, UnsupportedDefinition
from local_runner.record import report_local_run, save_local_record
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry
from local_runner.runner import ExecutionResult, LocalPipelineRunner
from local_runner.serving import invoke
from local_runner.spot import SpotInterruption
from local_runner.store import STORE_DIR, LocalObjectStore
from local_runner.trigger import object_created_event, parameters_from_event, stage_benchmark, upload_dataset
from pipeline_steps import names
from pipeline_steps.walk import all_steps

NAME = re.compile(f"{DATASET_NAME_FIRST}{DATASET_NAME_CHARACTER}{{0,{DATASET_NAME_MAX_LENGTH - 1}}}")
CHECKPOINT_SCHEDULE = ("checkpoint_minutes", "checkpoint_steps", "checkpoint_epochs")  # train.py's; 0: off


def name_value(text: str) -> tuple[str, str]:
    """A `--param` / `--hyperparameter NAME=VALUE` argument."""
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m local_runner",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--assembly",
        type=Path,
        default=assembly_dir(DEFAULT_ENV),
        help="cdk.out/<env>, as `make synth ENV=<env>` writes it (default: cdk.out/dev)",
    )
    parser.add_argument("--stack", help="the pipeline stack (default: the one stack holding a pipeline)")
    parser.add_argument(
        "--dataset", type=Path, help="default: the bundled sample of the assembly's task (data/sample-squad for QA)"
    )
    parser.add_argument(
        "--task",
        help="the task you mean to train: refused when the assembly's pipeline trains another (the pipeline's "
        "task is the synthesized one, make demo TASK=<task>)",
    )
    parser.add_argument("--dataset-name", help="the upload's NAME (default: the dataset folder's name)")
    parser.add_argument(
        "--model",
        help="a model folder (save_pretrained output) or a hub id (downloaded now) to train instead of MiniLM: "
        "staged under base-models/<its name>/, BaseModelUri set to it",
    )
    parser.add_argument(
        "--benchmark",
        type=Path,
        help="with evaluation.benchmark: the dataset whose validation/ is staged as the benchmark, as "
        "`make stage-benchmark` does (default: the task's bundled sample; data/sample-squad for QA, which prod's "
        "pin in cdk.json names)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=LOCAL_RUNS,
        help="local S3, model registry, job folders and logs (default: .local-runs)",
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of MiniLM: wiring only")
    spot = parser.add_argument_group("spot reclaim (what managed spot training does to a job)")
    spot.add_argument(
        "--interrupt-training-after-steps", type=int, metavar="N", help="SIGKILL every training process after step N"
    )
    spot.add_argument(
        "--interrupt-mid-checkpoint",
        action="store_true",
        help="instead, SIGKILL them as the first checkpoint at or after step N starts being written",
    )
    parser.add_argument(
        "--hyperparameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=name_value,
        help="override one of the training step's hyperparameters (e.g. checkpoint_steps=10)",
    )
    parser.add_argument(
        "--param", action="append", default=[], type=name_value, metavar="NAME=VALUE", help="pipeline parameter"
    )
    parser.add_argument(
        "--params",
        default="",
        type=lambda text: [name_value(item) for item in text.split()],
        metavar='"NAME=VALUE ..."',
        help="pipeline parameters in one text, as make train PARAMS= and make start PARAMS= take them",
    )
    parser.add_argument(
        "--deliver-event-twice",
        action="store_true",
        help="deliver the upload's event a second time, as S3's at-least-once delivery may: the second "
        "execution must stop after claiming the manifest",
    )
    return parser.parse_args(argv)


def impossible_interruption(definition: dict, interruption: SpotInterruption, overrides: dict[str, str]) -> str | None:
    """Why the requested spot reclaim can never happen in this run, or None. (One that the run turns out too
    short for is reported after it: the runner cannot know the step count before training.)"""
    [training] = [s for s in all_steps(definition["Steps"]) if s["Type"] == "Training"]
    arguments = training["Arguments"]
    if not arguments.get("EnableManagedSpotTraining"):
        return "--interrupt-training-after-steps: the training step does not use managed spot, so nothing retries it"
    if interruption.mid_checkpoint:
        if not arguments.get("CheckpointConfig"):
            return "--interrupt-mid-checkpoint: the training step has no CheckpointConfig, so no checkpoint is written"
        schedule = {
            name: float(json.loads(overrides.get(name, arguments["HyperParameters"].get(name, "0"))))
            for name in CHECKPOINT_SCHEDULE
            if name in arguments["HyperParameters"] or name in overrides
        }
        if not any(value > 0 for value in schedule.values()):
            return (
                f"--interrupt-mid-checkpoint: no periodic checkpoint is taken ({schedule}); set one with "
                "--hyperparameter"
            )
    return None


def checked_name(option: str, value: str) -> str:
    """`value` when it is a valid upload NAME (qa.outputs' rule, as `make upload-dataset` checks it)."""
    if not NAME.fullmatch(value):
        raise ValueError(
            f"{option} {value[:40]!r} is not 1 to {DATASET_NAME_MAX_LENGTH} letters, digits, '.', '_' or '-' starting "
            "with a letter or a digit: rename the folder or pass --dataset-name"
        )
    return value


def stage_base_model(args: argparse.Namespace, store: LocalObjectStore, base_models: str, given: str | None) -> str:
    """The run's BaseModelUri, its model staged there: --model (a folder, or a hub id downloaded now) under
    base-models/<its name>/, its tokenizer checked against its config (tools.stage_model); a BaseModelUri parameter
    as given; else the bundled model (--tiny: a tiny random one). The prefix then holds exactly that model."""
    if given is not None:
        if args.model:
            raise ValueError(
                f"--model and {names.BASE_MODEL_URI}={given} name two models: pass one (--model stages it)"
            )
        if given.startswith(base_models) and not (store.path(given.rstrip("/")) / MODEL_CONFIG).is_file():
            raise ValueError(
                f"{names.BASE_MODEL_URI}={given}: no model is staged there in {store.root}; pass the model folder "
                "with --model (make train MODEL=<folder>) instead"
            )
        print(f"base model: {given} ({names.BASE_MODEL_URI} given; nothing staged)")
        return given
    if args.model and args.tiny:
        raise ValueError("--tiny and --model name two models: pass one")
    if args.model:
        model_dir = local_model_dir(args.model) or download(args.model)
        checked_model(model_dir)
        name = checked_name("--model's folder name", own_name(args.model))
    elif args.tiny:
        model_dir, name = args.work_dir / "tiny-model", TINY_MODEL_NAME
        if not (model_dir / MODEL_CONFIG).exists():
            build_tiny_model_in_job(model_dir)
    else:
        model_dir, name = bundled_model_dir(), BUNDLED_MODEL_NAME
    model_uri = f"{base_models}/{name}/"
    store.mirror_dir(model_dir, model_uri)
    print(f"staged base model {model_dir} -> {model_uri}")
    return model_uri


def print_summary(result: ExecutionResult, store_root: Path, registry_path: Path) -> None:
    print(f"\n{'=' * 78}\nexecution {result.execution_id}: {result.status}")
    print(f"{'step':28} {'type':14} {'status':10} {'seconds':>8}  detail")
    for step in result.steps:
        print(f"{step.name:28} {step.type:14} {step.status:10} {step.seconds:8.1f}  {step.detail}")
    if result.metrics:
        print("metrics: " + ", ".join(f"{k}={v:.2f}" for k, v in result.metrics.items()))  # the task's METRICS order
    if result.model_package:
        package = result.model_package
        print(f"registered: {package.arn} ({package.approval_status}), model {package.model_data}")
    else:
        print("registered: nothing")
    if result.failure:
        print(f"failure: {result.failure}")
    print(f"artefacts: {store_root} (local S3), registry: {registry_path}")


def ask_registered_model(result: ExecutionResult, store: LocalObjectStore, work_dir: Path, task: ModuleType) -> int:
    """Put the first validation record of the pinned dataset (ClaimManifest's folder, which every graph trains
    from) to the registered model, as its SageMaker endpoint would answer; the task says what it asks and prints
    the answer (its example_request and describe_response)."""
    assert result.model_package is not None and result.inference_container is not None
    pinned = store.path(result.outputs[CLAIM_INPUT_URI])
    files, problems = read_manifest(pinned / PINNED_MANIFEST_FILE, pinned)
    assert not problems, problems  # the jobs validated it
    label_names = read_task_file(pinned, task.NAME).label_names
    example = load_dataset_files(
        {VALIDATION_SPLIT: files[VALIDATION_SPLIT]}, pinned, task=task, label_names=label_names
    ).records[VALIDATION_SPLIT][0]
    archive = store.path(result.model_package.model_data)
    try:
        response = invoke(result.inference_container, archive, work_dir, task.example_request(example))
    except InvocationFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"\n{task.describe_response(response, example, label_names)}")
    return 0


def checked_task(pipeline_task: str, expected: str | None) -> ModuleType:
    """The module of the pipeline's task; ValueError when the task the user named (--task, make's TASK) is
    another: the assembly decides, so the two can never disagree silently."""
    if expected is not None and expected != pipeline_task:
        raise ValueError(
            f"--task {expected} does not match the assembly's pipeline, which trains {pipeline_task}: synthesize "
            f"it with -c task={expected} (make demo TASK={expected}) or drop --task"
        )
    return task_module(pipeline_task)


def sample_dataset(task: ModuleType) -> Path:
    """The task's bundled sample dataset folder, data/<SAMPLE_DATASET>."""
    return SAMPLE_DATASET.parent / task.SAMPLE_DATASET


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    finally:
        store_once(args.work_dir)  # what a run that ended early wrote; nothing new after a full run


def store_once(work_dir: Path) -> None:
    """Every large file the runs wrote becomes a link to the blob of its content (local_runner/blobs.py)."""
    saved = BlobStore(work_dir).adopt_trees([work_dir / STORE_DIR, work_dir / LOCAL_EXECUTIONS])
    if saved:
        print(f"stored once per content: {saved / 2**20:,.0f} MiB of copies are now links to {work_dir / BLOBS_DIR}")


def run(args: argparse.Namespace) -> int:
    """Stage, upload, trigger and run one execution (two with --deliver-event-twice); the exit code."""
    account = LocalAccount()
    try:
        stack = args.stack or find_pipeline_stack(args.assembly, args.task)
        pipeline = load_synthesized_pipeline(args.assembly, stack, account)
        task = checked_task(pipeline.task, args.task)
    except (FileNotFoundError, UnsupportedDefinition, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    dataset = args.dataset or sample_dataset(task)
    benchmark = args.benchmark or sample_dataset(task)
    store = LocalObjectStore(args.work_dir / STORE_DIR)
    registry_path = args.work_dir / REGISTRY_FILE
    registry = LocalModelRegistry(registry_path)
    store.put_file(pipeline.code_archive, pipeline.code_uri)

    overrides: dict[str, str] = dict(args.param) | dict(args.params)
    base_models = f"s3://{pipeline.artifacts_bucket}/{ArtifactLayout().base_models}"
    try:
        dataset_name = checked_name("--dataset-name", args.dataset_name or dataset.resolve().name)
        overrides[names.BASE_MODEL_URI] = stage_base_model(
            args, store, base_models, overrides.get(names.BASE_MODEL_URI)
        )
    except ValueError as err:  # ModelFolderError included
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        staged_benchmark = stage_benchmark(store, pipeline.definition, benchmark, task.NAME)
    except ValueError as err:
        print(f"error: --benchmark {benchmark}: {err}", file=sys.stderr)
        return 2
    if staged_benchmark:
        print(f"staged benchmark {benchmark} -> {staged_benchmark}")

    version = time.strftime("%Y%m%d-%H%M%S")
    bucket = pipeline.datasets_bucket
    try:
        manifest_key, manifest_version = upload_dataset(
            store, dataset, bucket, dataset_name, version, DatasetLayout.of_task(task)
        )
    except ValueError as err:  # a columnar file that cannot be converted, as `make upload-dataset` says it
        print(f"error: {err}", file=sys.stderr)
        return 2
    event = object_created_event(
        bucket,
        manifest_key,
        store.path(f"s3://{bucket}/{manifest_key}").read_bytes(),
        account.account,
        account.region,
        version_id=manifest_version,
    )
    from_event = parameters_from_event(pipeline, event)
    if from_event is None:
        print(f"error: the trigger rule did not match the upload of s3://{bucket}/{manifest_key}", file=sys.stderr)
        return 1
    print(f"uploaded dataset, manifest last: s3://{bucket}/{manifest_key}")
    print(f"trigger rule matched the Object Created event -> parameters {from_event}")
    overrides.update(from_event)
    interruption = None
    if args.interrupt_training_after_steps is not None or args.interrupt_mid_checkpoint:
        interruption = SpotInterruption(args.interrupt_training_after_steps or 0, args.interrupt_mid_checkpoint)
        problem = impossible_interruption(pipeline.definition, interruption, dict(args.hyperparameter))
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    try:
        runner = LocalPipelineRunner(
            pipeline.definition,
            pipeline.pipeline_name,
            store,
            registry,
            args.work_dir / LOCAL_EXECUTIONS,
            interruption=interruption,
            hyperparameter_overrides=dict(args.hyperparameter),
            on_progress=lambda progress: save_local_record(
                progress, pipeline.pipeline_name, store, args.work_dir, pipeline.task
            ),
        )
        result = runner.run(overrides)
        print_summary(result, store.root, registry_path)
        report_local_run(result, pipeline.pipeline_name, store, args.work_dir, print, pipeline.task)
        duplicate = None
        if args.deliver_event_twice:
            print("\nthe same Object Created event is delivered again (EventBridge delivers at least once)")
            duplicate = runner.run(overrides)
            print_summary(duplicate, store.root, registry_path)
            report_local_run(duplicate, pipeline.pipeline_name, store, args.work_dir, print, pipeline.task)
    except (UnsupportedDefinition, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for warning in [*result.warnings, *(duplicate.warnings if duplicate else [])]:
        print(f"error: {warning}", file=sys.stderr)
    if result.status != "Succeeded" or (duplicate is not None and duplicate.status != "Succeeded"):
        return 1
    if result.warnings:
        return 1
    if result.model_package is None:
        return 0
    store_once(args.work_dir)  # before the endpoint answers: the demo's last lines are its question and answer
    endpoint_dir = args.work_dir / LOCAL_EXECUTIONS / result.execution_id / "endpoint"
    return ask_registered_model(result, store, endpoint_dir, task)


if __name__ == "__main__":
    sys.exit(main())
