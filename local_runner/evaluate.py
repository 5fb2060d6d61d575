"""Evaluate a registered model package on a benchmark: `make evaluate PACKAGE=<local arn> [BENCHMARK=<dataset dir>]`.

The package's model answers every record of the benchmark as its SageMaker endpoint would (local_runner/serving.py:
the inference code inside its model.tar.gz, one request per record, the task's example_request), and the answers
are scored with the task's metrics as the gate scores them (the task's response_scores: SQuAD exact match and F1,
accuracy and macro-F1, entity-level precision, recall and F1). The task and label names are the model's own (the
archive's task.json, written by FineTune); the benchmark must hold that task's records with the same label names.
The benchmark: the environment's staged one (evaluation.benchmark of the package's pipeline, staged into the local
store by the local runner or `make stage-benchmark`), checked against its pin as the jobs check it
(qa/benchmark.py verify); or BENCHMARK=<dataset dir>, whose validation/ split is the benchmark. The scores, with the
package's recorded ones, are printed and written to .local-runs/evaluations/<group>-<version>/evaluation.json.

Local packages only. On AWS the same needs a job that can read the registry copy and the benchmark (the job role, in
the VPC, as ValidateAndTokenize/FineTune read them): a processing job running this scoring on the package's
ModelDataUrl, its result written beside the package's evaluation and recorded with UpdateModelPackage's
CustomerMetadataProperties; not built yet.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

from qa import benchmark
from qa.data import load_dataset_files
from qa.outputs import BENCHMARK_SPLIT, SAGEMAKER_PROGRAM_ENV, SERVING_PROGRAM, TASK_FILE
from qa.task_file import TaskFile
from tasks import DEFAULT_TASK, task

from config import ConfigError, Settings, load_settings, read_cdk_json_context
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON, LOCAL_RUNS
from local_runner.assembly import LocalAccount
from local_runner.errors import InvocationFailed, fail
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry, ModelPackage
from local_runner.serving import LocalEndpoint
from local_runner.store import STORE_DIR, LocalObjectStore

EVALUATIONS_DIR = "evaluations"  # under the local runs' folder: one folder per evaluated package


def settings_for(env_name: str, task_name: str | None = None) -> Settings:
    """The settings of `env_name`'s pipeline of `task_name` as `make demo TASK=<task>` synthesizes it (one of its
    `pipelines`, else its own settings with that task; None: its own pipeline)."""
    try:
        return load_settings(
            {**read_cdk_json_context(CDK_JSON), "env": env_name, **({"task": task_name} if task_name else {})}
        )
    except ConfigError as err:
        fail(str(err))


def model_task(archive: Path) -> TaskFile:
    """The task the archive's model was trained for and its label names (its TASK_FILE; an archive without one holds
    a question-answering model: FineTune wrote none before tasks had labels)."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.name.removeprefix("./") == TASK_FILE else None
            if handle is not None:
                return TaskFile.from_document(json.load(handle))
    return TaskFile(DEFAULT_TASK)


def staged_benchmark(env_name: str, store: LocalObjectStore, model: TaskFile) -> tuple[Path, list[Path], str]:
    """(folder, files, description) of the pinned benchmark of `env_name`'s pipeline of the model's task in the local
    store, verified against the pin and declaring the model's label names."""
    settings = settings_for(env_name, model.task)
    pinned = settings.evaluation.benchmark
    if pinned is None:
        fail(
            f"{env_name}'s {model.task} pipeline pins no benchmark (evaluation.benchmark): pass BENCHMARK=<dataset dir>"
        )
    account = LocalAccount()
    bucket = settings.bucket_name("artifacts", account.account, account.region)
    folder = store.path(f"s3://{bucket}/{benchmark.prefix(pinned.name, pinned.version)}")
    files, problem = benchmark.verify(folder, pinned.manifest_sha256)
    problem = problem or benchmark.declaration_problem(folder, model.task, model.label_names)
    if problem:
        fail(f"{problem} (local store {folder}; the local runner stages it: make demo ENV={env_name})")
    return folder, files, f"{pinned.name}/{pinned.version} (staged, SHA-256 {pinned.manifest_sha256[:12]} as pinned)"


def dataset_benchmark(dataset_dir: Path, model: TaskFile) -> tuple[Path, list[Path], str]:
    """(folder, files, description) of a dataset folder's validation split, checked as stage-benchmark checks it,
    declaring the model's label names."""
    try:
        staged, declared = benchmark.check_folder(dataset_dir, model.task)
    except ValueError as err:
        fail(f"BENCHMARK {dataset_dir}: {err}")
    if declared.label_names != model.label_names:
        fail(
            f"BENCHMARK {dataset_dir} declares the label names {list(declared.label_names or [])}, the model "
            f"{list(model.label_names or [])}: the scores would compare other classes"
        )
    return dataset_dir, [path for path, _ in staged], f"{dataset_dir}/{BENCHMARK_SPLIT}"


def evaluate(
    package: ModelPackage, archive: Path, records: list[dict[str, Any]], work_dir: Path, model: TaskFile
) -> dict[str, float]:
    """The task's METRICS (percent) of the package's answers to the records' requests."""
    facts: ModuleType = task(model.task)
    container = {"Environment": {SAGEMAKER_PROGRAM_ENV: SERVING_PROGRAM}, "ModelDataUrl": package.model_data}
    with LocalEndpoint(container, archive, work_dir) as endpoint:
        responses = [endpoint.invoke(facts.example_request(record)) for record in records]
    return facts.response_scores(records, responses, model.label_names)


def recorded_scores(package: ModelPackage) -> dict[str, float]:
    """What the package recorded at registration: its model-quality report (metrics.<name>.value, as RegisterModel
    keeps it), or the run's flat scores (make register)."""
    quality = package.metrics.get("metrics")
    if isinstance(quality, dict):
        return {name: float(entry["value"]) for name, entry in quality.items() if isinstance(entry, dict)}
    return {name: float(value) for name, value in package.metrics.items() if isinstance(value, int | float)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local_runner.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--package", required=True, help="a local model package ARN (make runs LOCAL=1 lists them)")
    parser.add_argument("--benchmark", type=Path, help="a dataset folder whose validation/ is the benchmark")
    parser.add_argument("--env", default=DEFAULT_ENV, help="whose staged benchmark (evaluation.benchmark)")
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
    )
    args = parser.parse_args(argv)
    if ":local:" not in args.package:
        fail(f"--package {args.package!r}: only local packages can be evaluated yet (see --help for what AWS needs)")
    package = LocalModelRegistry(args.work_dir / REGISTRY_FILE).package(args.package)
    if package is None:
        fail(f"no local model package {args.package} in {args.work_dir / REGISTRY_FILE}")
    store = LocalObjectStore(args.work_dir / STORE_DIR)
    archive = store.path(package.model_data)
    if not archive.is_file():
        fail(f"{package.arn}: its model {package.model_data} is not in the local store (removed by clean-runs?)")
    model = model_task(archive)
    folder, files, described = (
        dataset_benchmark(args.benchmark, model) if args.benchmark else staged_benchmark(args.env, store, model)
    )
    records = load_dataset_files(
        {BENCHMARK_SPLIT: files}, folder, task=task(model.task), label_names=model.label_names
    ).records[BENCHMARK_SPLIT]
    output = args.work_dir / EVALUATIONS_DIR / f"{package.group}-{package.version}"
    output.mkdir(parents=True, exist_ok=True)
    try:
        scores = evaluate(package, archive, records, output, model)
    except InvocationFailed as err:
        fail(str(err).splitlines()[0])
    result = {"package": package.arn, "task": model.task, "benchmark": described, "examples": len(records), **scores}
    (output / "evaluation.json").write_text(json.dumps(result, indent=2))
    print(f"{package.arn} ({model.task}) on {described}: {len(records)} examples")
    print("  " + " ".join(f"{name}={value:.2f}" for name, value in scores.items()))
    recorded = ", ".join(f"{k}={v:.2f}" for k, v in sorted(recorded_scores(package).items())) or "none"
    print(f"  recorded at registration: {recorded}")
    print(f"  written to {output / 'evaluation.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
