"""Evaluate a registered model package on a benchmark: `make evaluate PACKAGE=<local arn> [BENCHMARK=<dataset dir>]`.

The package's model answers every question of the benchmark as its SageMaker endpoint would (local_runner/serving.py:
the inference code inside its model.tar.gz, one request per question), and the answers are scored as the F1 gate
scores them (SQuAD v1.1 exact match and F1, qa/metrics.py). The benchmark: the environment's staged one
(evaluation.benchmark, staged into the local store by the local runner or `make stage-benchmark`), checked against
its pin as the jobs check it (qa/benchmark.py verify); or BENCHMARK=<dataset dir>, whose validation/ split is the
benchmark. The scores, with the package's recorded ones, are printed and written to
.local-runs/evaluations/<group>-<version>/evaluation.json.

Local packages only. On AWS the same needs a job that can read the registry copy and the benchmark (the job role, in
the VPC, as ValidateAndTokenize/FineTune read them): a processing job running this scoring on the package's
ModelDataUrl, its result written beside the package's evaluation and recorded with UpdateModelPackage's
CustomerMetadataProperties; not built yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qa import benchmark
from qa.data import load_dataset_files
from qa.metrics import squad_scores
from qa.outputs import BENCHMARK_SPLIT, SAGEMAKER_PROGRAM_ENV, SERVING_PROGRAM

from config import ConfigError, Settings, load_settings, read_cdk_json_context
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON, LOCAL_RUNS
from local_runner.assembly import LocalAccount
from local_runner.errors import InvocationFailed, fail
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry, ModelPackage
from local_runner.serving import LocalEndpoint
from local_runner.store import STORE_DIR, LocalObjectStore

EVALUATIONS_DIR = "evaluations"  # under the local runs' folder: one folder per evaluated package


def settings_for(env_name: str) -> Settings:
    try:
        return load_settings({**read_cdk_json_context(CDK_JSON), "env": env_name})
    except ConfigError as err:
        fail(str(err))


def staged_benchmark(env_name: str, store: LocalObjectStore) -> tuple[Path, list[Path], str]:
    """(folder, files, description) of the environment's pinned benchmark in the local store, verified."""
    settings = settings_for(env_name)
    pinned = settings.evaluation.benchmark
    if pinned is None:
        fail(f"{env_name} pins no benchmark (evaluation.benchmark): pass BENCHMARK=<dataset dir>")
    account = LocalAccount()
    bucket = settings.bucket_name("artifacts", account.account, account.region)
    folder = store.path(f"s3://{bucket}/{benchmark.prefix(pinned.name, pinned.version)}")
    files, problem = benchmark.verify(folder, pinned.manifest_sha256)
    if problem:
        fail(f"{problem} (local store {folder}; the local runner stages it: make demo ENV={env_name})")
    return folder, files, f"{pinned.name}/{pinned.version} (staged, SHA-256 {pinned.manifest_sha256[:12]} as pinned)"


def dataset_benchmark(dataset_dir: Path) -> tuple[Path, list[Path], str]:
    """(folder, files, description) of a dataset folder's validation split, checked as stage-benchmark checks it."""
    try:
        files = [path for path, _ in benchmark.check_folder(dataset_dir)]
    except ValueError as err:
        fail(f"BENCHMARK {dataset_dir}: {err}")
    return dataset_dir, files, f"{dataset_dir}/{BENCHMARK_SPLIT}"


def evaluate(package: ModelPackage, archive: Path, records: list[dict], work_dir: Path) -> dict[str, float]:
    """Exact match and F1 (percent) of the package's answers to the records' questions."""
    container = {"Environment": {SAGEMAKER_PROGRAM_ENV: SERVING_PROGRAM}, "ModelDataUrl": package.model_data}
    predictions = {}
    with LocalEndpoint(container, archive, work_dir) as endpoint:
        for record in records:
            response = endpoint.invoke({"inputs": {"question": record["question"], "context": record["context"]}})
            predictions[record["id"]] = response["answer"]
    return squad_scores(predictions, {r["id"]: r["answers"]["text"] for r in records})


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
    folder, files, described = (
        dataset_benchmark(args.benchmark) if args.benchmark else staged_benchmark(args.env, store)
    )
    records = load_dataset_files({BENCHMARK_SPLIT: files}, folder).records[BENCHMARK_SPLIT]
    output = args.work_dir / EVALUATIONS_DIR / f"{package.group}-{package.version}"
    output.mkdir(parents=True, exist_ok=True)
    try:
        scores = evaluate(package, archive, records, output)
    except InvocationFailed as err:
        fail(str(err).splitlines()[0])
    result = {"package": package.arn, "benchmark": described, "examples": len(records), **scores}
    (output / "evaluation.json").write_text(json.dumps(result, indent=2))
    print(f"{package.arn} on {described}: {len(records)} questions")
    print(f"  exact_match={scores['exact_match']:.2f} f1={scores['f1']:.2f}")
    recorded = ", ".join(f"{k}={v:.2f}" for k, v in sorted(recorded_scores(package).items())) or "none"
    print(f"  recorded at registration: {recorded}")
    print(f"  written to {output / 'evaluation.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
