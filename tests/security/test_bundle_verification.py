"""Issue 30, finding 3: the code the jobs run is the bundle the stacks built. Both jobs download it from the CDK
bootstrap assets bucket, which every CDK deployer's file-publishing role may write (PutObject* on the whole bucket).
Before the fix nothing checked it: the processing job ran `tar -xzf ...; exec python3` on whatever object was there,
and the training toolkit extracted it and ran its train.py. Now each job's ContainerEntrypoint (in the definition)
checks the downloaded file against the SHA-256 the definition carries before anything from it is extracted or run.

The attack is played on the exact entry commands of the synthesized definition (resolved as the local runner
resolves it), container paths mapped into a temporary folder, and through the local runner's training path."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa.outputs import CODE_DIR

from config.paths import TRAINING_CODE
from local_runner.assembly import LocalAccount, SynthesizedPipeline, load_synthesized_pipeline
from local_runner.errors import StepFailed
from local_runner.expressions import ExpressionResolver
from local_runner.jobs import JOB_LOG, CheckpointSync, Container, prepare_container, resolve_training_job
from local_runner.store import LocalObjectStore
from pipeline_steps import names
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from stacks.source_bundle import build_source_tarball

# What the planted code would do: leave a mark in the working directory.
MARK = "import pathlib; pathlib.Path('ran').write_text('planted')"


@pytest.fixture(scope="module")
def dev(synthesized_cpu_job):
    """The cpu_job graph's dev stacks: both entry commands (ValidateAndTokenize's and FineTune's) check the bundle."""
    return synthesized_cpu_job["dev"]


@pytest.fixture(scope="module")
def pipeline(dev) -> SynthesizedPipeline:
    return load_synthesized_pipeline(dev.assembly, dev.settings.stack_name("pipeline"), LocalAccount())


@pytest.fixture(scope="module")
def genuine() -> bytes:
    return build_source_tarball(TRAINING_CODE)


def arguments(pipeline: SynthesizedPipeline, step_name: str) -> dict[str, Any]:
    return find_step(pipeline.definition, step_name)["Arguments"]


def appended_byte(bundle: bytes) -> bytes:
    return bundle + b"\0"


def planted_entry_points(bundle: bytes) -> bytes:
    """A well-formed bundle whose entry points are the attacker's."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name in ("preprocess.py", "train.py"):
            info = tarfile.TarInfo(name)
            info.size = len(MARK)
            tar.addfile(info, io.BytesIO(MARK.encode()))
    return raw.getvalue()


TAMPERINGS = [appended_byte, planted_entry_points]


def test_the_definition_carries_the_digest_of_the_bundle_the_stacks_built(dev, pipeline, genuine):
    digest = hashlib.sha256(genuine).hexdigest()
    _, variables = synthesized_definition(dev.templates["pipeline"])
    assert variables["CodeSha256"] == digest  # a literal of the template, not a deploy-time lookup
    assert hashlib.sha256(pipeline.code_archive.read_bytes()).hexdigest() == digest  # the asset CDK publishes
    preprocess = arguments(pipeline, names.PREPROCESS_STEP)["AppSpecification"]["ContainerEntrypoint"]
    train = arguments(pipeline, names.TRAIN_STEP)
    key = pipeline.code_uri.rsplit("/", 1)[1]
    assert preprocess[3:] == [digest, f"/opt/ml/processing/input/code/{key}"]
    assert train["AlgorithmSpecification"]["ContainerEntrypoint"][3:] == [digest, f"/opt/ml/input/data/code/{key}"]
    # The toolkit extracts exactly the file the entry command checked.
    assert train["HyperParameters"]["sagemaker_submit_directory"] == f'"/opt/ml/input/data/code/{key}"'


def run_entry_command(
    entrypoint: list[str], arguments: list[str], bundle: bytes, root: Path
) -> subprocess.CompletedProcess:
    """What the container does: SageMaker has downloaded `bundle` where the entry command looks for it; the command
    then runs with the job's arguments (container paths under `root`)."""
    container = Container(root)
    command = [container.map(part) for part in entrypoint]
    downloaded = Path(command[4])
    downloaded.parent.mkdir(parents=True, exist_ok=True)
    downloaded.write_bytes(bundle)
    root.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([*command, *arguments], cwd=root, env=env, capture_output=True, text=True, timeout=60)


def test_the_processing_entry_command_runs_the_genuine_bundle(pipeline, genuine, tmp_path):
    entrypoint = arguments(pipeline, names.PREPROCESS_STEP)["AppSpecification"]["ContainerEntrypoint"]
    result = run_entry_command(entrypoint, ["-c", MARK], genuine, tmp_path)
    assert result.returncode == 0, result.stderr
    code_dir = Container(tmp_path).path(CODE_DIR)
    assert (code_dir / "ran").is_file() and (code_dir / "preprocess.py").is_file()


@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_the_processing_entry_command_refuses_a_replaced_bundle(pipeline, genuine, tmp_path, tamper: Callable):
    app = arguments(pipeline, names.PREPROCESS_STEP)["AppSpecification"]
    result = run_entry_command(app["ContainerEntrypoint"], ["preprocess.py"], tamper(genuine), tmp_path)
    assert result.returncode == 1
    assert "refusing to run" in result.stderr and "the deployed code bundle's" in result.stderr
    assert not Container(tmp_path).path(CODE_DIR).exists()  # nothing was extracted, so nothing of it ran


@pytest.mark.parametrize("tamper", [lambda bundle: bundle, *TAMPERINGS])
def test_the_training_entry_command_checks_the_bundle_before_the_image_starts(
    pipeline, genuine, tmp_path, tamper: Callable
):
    algorithm = arguments(pipeline, names.TRAIN_STEP)["AlgorithmSpecification"]
    # In place of the image's start command (ContainerArguments), one that leaves a mark.
    result = run_entry_command(algorithm["ContainerEntrypoint"], ["python3", "-c", MARK], tamper(genuine), tmp_path)
    intact = tamper(genuine) == genuine
    assert result.returncode == (0 if intact else 1), result.stderr
    assert (tmp_path / "ran").is_file() == intact
    assert intact or "refusing to run" in result.stderr


@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_the_local_runner_refuses_a_replaced_bundle_before_extracting_it(pipeline, genuine, tmp_path, tamper):
    store = LocalObjectStore(tmp_path / "s3")
    store.put_bytes(tamper(genuine), pipeline.code_uri)
    definition = pipeline.definition
    preprocess = find_step(definition, names.PREPROCESS_STEP)["Arguments"]
    resolver = ExpressionResolver(
        {spec["Name"]: spec["DefaultValue"] for spec in definition["Parameters"]},
        {"PipelineExecutionId": "local-000000000000"},
        {names.PREPROCESS_STEP: {"ProcessingOutputConfig": preprocess["ProcessingOutputConfig"]}},
    )
    request = resolver.resolve(arguments(pipeline, names.TRAIN_STEP))
    job = resolve_training_job(names.TRAIN_STEP, request, tmp_path / "job", "job", {})
    with pytest.raises(StepFailed, match="the container's entry command exited with code 1"):
        prepare_container(job, store, CheckpointSync(store, job.checkpoint_dir, None), lambda line: None)
    assert not job.code_dir.exists() or not any(job.code_dir.iterdir())
    assert "refusing to run" in (job.container.root / JOB_LOG).read_text()
