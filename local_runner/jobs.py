"""Processing and training jobs as local processes, under the SageMaker container contract.

Container paths under /opt/ml/ are mapped into a per-job folder; S3 URIs into the local object store.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from qa.outputs import (
    CHECKPOINT_DIR,
    CODE_DIR,
    LOCAL_CHECKPOINT_DIR_ENV,
    LOCAL_TENSORBOARD_DIR_ENV,
    LOCAL_TOKENIZED_DIR_ENV,
    MODEL_DIR,
    MODEL_DIR_ENV,
    OUTPUT_DATA_DIR,
    OUTPUT_DATA_DIR_ENV,
    TENSORBOARD_DIR,
    TOKENIZED_DIR,
    TRAINING_CHANNELS_DIR,
    channel_env,
)

from config.instance_types import INSTANCE_TYPES
from local_runner.errors import StepFailed, UnsupportedDefinition
from local_runner.job_log import JobLog, Printer
from local_runner.launch import hyperparameter_args, job_environment, job_python, launcher
from local_runner.spot import SpotInterruption, reclaim
from local_runner.store import LocalObjectStore

PROCESSING_FIELDS = {
    "ProcessingResources",
    "AppSpecification",
    "RoleArn",
    "ProcessingInputs",
    "ProcessingOutputConfig",
    "Environment",
    "NetworkConfig",
    "StoppingCondition",
}
TRAINING_FIELDS = {
    "AlgorithmSpecification",
    "OutputDataConfig",
    "StoppingCondition",
    "ResourceConfig",
    "RoleArn",
    "InputDataConfig",
    "HyperParameters",
    "VpcConfig",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "ProfilerConfig",
    "Environment",
    "DebugHookConfig",
    "EnableNetworkIsolation",
    "TensorBoardOutputConfig",
}
CHANNELS_DIR = TRAINING_CHANNELS_DIR + "/"
# StopTrainingJob "sends the algorithm the SIGTERM signal, which delays job termination for 120 seconds"
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StopTrainingJob.html); locally a shorter grace.
STOP_GRACE_SECONDS = 20
JOB_LOG = "job.log"  # the job's whole output, as its CloudWatch log stream would hold it


def check_fields(step_name: str, arguments: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise UnsupportedDefinition(f"step {step_name!r}: fields not supported by the local runner: {unknown}")


@dataclass
class Container:
    """A job's private folder standing in for the container's filesystem."""

    root: Path

    @property
    def opt_ml(self) -> Path:
        return self.root / "opt" / "ml"

    def map(self, value: str) -> str:
        """Container paths (/opt/ml/...) inside any string -> the local folder."""
        return value.replace("/opt/ml/", f"{self.opt_ml}/")

    def path(self, container_path: str) -> Path:
        return Path(self.map(container_path.rstrip("/") + "/"))

    @property
    def temp_dir(self) -> Path:
        """The job's TMPDIR (torchrun's torchelastic_* log folders, tempfile's files): removed when the job ends,
        so that no job leaves anything in the system's temporary directory."""
        return self.root / "tmp"

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """The job interpreter's folder first on PATH (the container's `python3`), the job's TMPDIR, plus the job's
        variables."""
        env = job_environment()
        env["PATH"] = f"{Path(job_python()).parent}{os.pathsep}{env.get('PATH', '')}"
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        env.update({"PYTHONUNBUFFERED": "1", "TMPDIR": str(self.temp_dir), **extra})
        return env

    def remove_temp_dir(self) -> None:
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _stream(
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    log_path: Path,
    out: Printer,
    on_line: Callable[[str, subprocess.Popen[str]], None] | None = None,
) -> int:
    """Run a command in a session of its own: all output into the job's log file, stdout echoed, stderr echoed
    without library noise."""
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    # Lines end at "\n" only, so that a progress bar's "\r" redraws stay one line. (In text mode Popen's pipes
    # are TextIOWrappers; typeshed declares them IO[str].)
    raw_stderr = cast(io.TextIOWrapper, proc.stderr).detach()
    stderr = io.TextIOWrapper(raw_stderr, encoding="utf-8", errors="replace", newline="\n")
    log = JobLog(log_path, out, lambda line: print(line, file=sys.stderr, flush=True))
    stderr_reader = threading.Thread(target=log.follow_stderr, args=(stderr,), daemon=True)
    stderr_reader.start()
    try:
        for line in proc.stdout:
            log.stdout_line(line)
            if on_line:
                on_line(line, proc)
        code = proc.wait()
    except BaseException:  # the runner is stopping (ExecutionStopped, KeyboardInterrupt): so does the job
        stop_process_group(proc)
        raise
    finally:
        stderr_reader.join(timeout=STOP_GRACE_SECONDS)
        log.close()
    return code


def stop_process_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to every process of the job (its own session: torchrun and its workers), as StopTrainingJob sends
    it; SIGKILL to what is left after STOP_GRACE_SECONDS."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_processing(name: str, args: dict[str, Any], store: LocalObjectStore, job_dir: Path, out: Printer) -> dict:
    """A ProcessingStep's job; returns its properties (outputs with their S3 URIs)."""
    check_fields(name, args, PROCESSING_FIELDS)
    container = Container(job_dir)
    for item in args.get("ProcessingInputs", []):
        s3_input = item["S3Input"]
        if s3_input.get("S3InputMode", "File") != "File" or s3_input.get("S3CompressionType", "None") != "None":
            raise UnsupportedDefinition(f"step {name!r}: input {item['InputName']!r} mode is not supported locally")
        destination = container.path(s3_input["LocalPath"])
        destination.mkdir(parents=True, exist_ok=True)
        if s3_input["S3DataType"] == "S3Prefix":
            if not store.download_prefix(s3_input["S3Uri"], destination):
                raise StepFailed(f"{name}: input {item['InputName']!r}: nothing at {s3_input['S3Uri']}")
        elif s3_input["S3DataType"] == "ManifestFile":
            _download_manifest_files(name, item["InputName"], s3_input["S3Uri"], store, destination)
        else:
            raise UnsupportedDefinition(f"step {name!r}: S3DataType {s3_input['S3DataType']!r} not supported locally")
    app = args["AppSpecification"]
    command = [
        container.map(part) for part in [*app.get("ContainerEntrypoint", []), *app.get("ContainerArguments", [])]
    ]
    # No LOCAL_S3_ROOT: an isolated job reaches no S3 of its own, only what SageMaker downloads and uploads.
    env = container.environment({k: str(v) for k, v in args.get("Environment", {}).items()})
    try:
        code = _stream(command, env, job_dir, job_dir / JOB_LOG, out)
    finally:
        container.remove_temp_dir()
    if code != 0:
        raise StepFailed(f"{name}: the processing job exited with code {code} (its messages are above)")
    outputs = args.get("ProcessingOutputConfig", {}).get("Outputs", [])
    for output in outputs:
        s3_output = output["S3Output"]
        store.upload_dir(container.path(s3_output["LocalPath"]), s3_output["S3Uri"])
    return {"ProcessingOutputConfig": {"Outputs": outputs}, "ProcessingJobStatus": "Completed"}


def _download_manifest_files(name: str, input_name: str, uri: str, store: LocalObjectStore, destination: Path) -> None:
    manifest_path = store.path(uri)
    if not manifest_path.is_file():
        raise StepFailed(f"{name}: input {input_name!r}: manifest {uri} does not exist")
    manifest = json.loads(manifest_path.read_text())
    prefix = manifest[0]["prefix"]
    for key in manifest[1:]:
        source = store.path(prefix + key)
        if not source.is_file():
            raise StepFailed(f"{name}: input {input_name!r}: the manifest names {prefix}{key}, which does not exist")
        target = destination / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


@dataclass(frozen=True)
class TrainingOutcome:
    interrupted_after: str | None  # the job's last log line before a spot reclaim killed it
    properties: dict[str, Any]


class CheckpointSync:
    """What SageMaker does with checkpoint_s3_uri: restore on start; while running, upload new files and
    delete the objects of files deleted locally."""

    def __init__(self, store: LocalObjectStore, local_dir: Path, uri: str | None) -> None:
        self.store, self.local_dir, self.uri = store, local_dir, uri
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def restore(self) -> int:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        return self.store.download_prefix(self.uri.rstrip("/") + "/", self.local_dir) if self.uri else 0

    def _loop(self) -> None:
        while not self._stop.wait(2.0):
            self.sync()

    def sync(self) -> None:
        if self.uri and self.local_dir.is_dir():
            # A file pruned while being copied: the next round catches up.
            with contextlib.suppress(FileNotFoundError):
                self.store.mirror_dir(self.local_dir, self.uri)

    def __enter__(self) -> CheckpointSync:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sync()


def _decode_hyperparameter(value: str) -> str:
    """The SDK JSON-encodes string hyperparameters ('"bf16"'); numbers arrive as plain text."""
    decoded: str = json.loads(value) if value.startswith('"') else value
    return decoded


@dataclass(frozen=True)
class TrainingJob:
    """A CreateTrainingJob request resolved for this machine: what to start, with what, and where."""

    step_name: str
    job_name: str
    container: Container
    submit_directory: str  # S3 URI of the source archive (tar.gz)
    bundle_file: Path | None  # where the archive lands in the container, when it arrives as an input channel
    entrypoint: list[str]  # the request's ContainerEntrypoint, container paths mapped (empty: the image's own)
    program: str
    hyperparameters: dict[str, str]  # the entry point's own, overrides applied
    channel_uris: dict[str, str]  # input channel -> S3 prefix
    checkpoint_uri: str | None
    checkpoint_dir: Path
    tensorboard_uri: str | None
    tensorboard_dir: Path
    metric_definitions: list[dict[str, str]]
    environment: dict[str, str]  # the request's own variables
    instance_type: str
    instance_count: int
    requested_processes: int  # one per GPU of every instance (one per CPU-only instance)
    processes: int  # what runs here: capped to this machine's cores; 1 without data parallelism
    backend: str | None  # the data-parallel launcher as named to the user; None for a single process
    artifact_uri: str  # where model.tar.gz goes

    @property
    def code_dir(self) -> Path:
        return self.container.path(CODE_DIR)

    @property
    def model_dir(self) -> Path:
        return self.container.path(MODEL_DIR)

    def channel_dir(self, channel: str) -> Path:
        return self.container.path(f"{TRAINING_CHANNELS_DIR}/{channel}")


def resolve_training_job(
    step_name: str, args: dict[str, Any], job_dir: Path, job_name: str, hyperparameter_overrides: dict[str, str]
) -> TrainingJob:
    """Check and decode a TrainingStep's arguments; nothing is downloaded or started yet."""
    check_fields(step_name, args, TRAINING_FIELDS)
    hps = {k: str(v) for k, v in args.get("HyperParameters", {}).items()}
    user_hps = {k: _decode_hyperparameter(v) for k, v in hps.items() if not k.startswith("sagemaker_")}
    unknown = sorted(set(hyperparameter_overrides) - set(user_hps))
    if unknown:
        raise UnsupportedDefinition(
            f"step {step_name!r}: no hyperparameters {unknown} to override; has {sorted(user_hps)}"
        )
    smddp = hps.get("sagemaker_distributed_dataparallel_enabled") == "true"
    distributed = smddp or hps.get("sagemaker_torch_distributed_enabled") == "true"
    resources = args["ResourceConfig"]
    instance_type, instance_count = resources["InstanceType"], int(resources["InstanceCount"])
    # One process per GPU under torchrun (one per node on CPU-only types).
    gpus = INSTANCE_TYPES[instance_type].gpus if instance_type in INSTANCE_TYPES else 1
    requested = instance_count * max(1, gpus)
    checkpoint_config = args.get("CheckpointConfig") or {}
    tensorboard_config = args.get("TensorBoardOutputConfig") or {}
    container = Container(job_dir)
    channel_uris = {
        channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
        for channel in args.get("InputDataConfig", [])
    }
    submit_directory = _decode_hyperparameter(hps["sagemaker_submit_directory"])
    bundle_file = container.path(submit_directory) if submit_directory.startswith(CHANNELS_DIR) else None
    if submit_directory.startswith(CHANNELS_DIR):
        # Network isolation: the source bundle arrives as a channel (an S3Prefix naming the object itself).
        channel = submit_directory.removeprefix(CHANNELS_DIR).split("/", 1)[0]
        if channel not in channel_uris:
            raise UnsupportedDefinition(f"step {step_name!r}: sagemaker_submit_directory names no channel {channel!r}")
        submit_directory = channel_uris.pop(channel)
    return TrainingJob(
        step_name=step_name,
        job_name=job_name,
        container=container,
        submit_directory=submit_directory,
        bundle_file=bundle_file,
        entrypoint=[container.map(part) for part in args["AlgorithmSpecification"].get("ContainerEntrypoint", [])],
        program=_decode_hyperparameter(hps["sagemaker_program"]),
        hyperparameters={**user_hps, **hyperparameter_overrides},
        channel_uris=channel_uris,
        checkpoint_uri=checkpoint_config.get("S3Uri"),
        checkpoint_dir=container.path(checkpoint_config.get("LocalPath", CHECKPOINT_DIR)),
        tensorboard_uri=tensorboard_config.get("S3OutputPath"),
        tensorboard_dir=container.path(tensorboard_config.get("LocalPath", TENSORBOARD_DIR)),
        metric_definitions=list(args["AlgorithmSpecification"].get("MetricDefinitions", [])),
        environment={k: str(v) for k, v in args.get("Environment", {}).items()},
        instance_type=instance_type,
        instance_count=instance_count,
        requested_processes=requested,
        processes=max(1, min(requested, os.cpu_count() or 1)) if distributed else 1,
        backend=("SMDDP (run locally with torchrun + gloo)" if smddp else "torchrun") if distributed else None,
        artifact_uri=f"{args['OutputDataConfig']['S3OutputPath'].rstrip('/')}/{job_name}/output/model.tar.gz",
    )


def prepare_container(job: TrainingJob, store: LocalObjectStore, checkpoints: CheckpointSync, out: Printer) -> None:
    """Fill the container's folders as SageMaker and the image's toolkit do before the entry point starts: the
    source bundle downloaded, the request's ContainerEntrypoint run (which may refuse it), the bundle extracted, one
    folder per input channel, the checkpoints restored from S3, an empty model folder."""
    archive = store.path(job.submit_directory)
    if job.bundle_file is not None:
        job.bundle_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(archive, job.bundle_file)
        archive = job.bundle_file
    if job.entrypoint:
        run_container_entrypoint(job, out)
    job.code_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(job.code_dir, filter="data")
    for channel, uri in job.channel_uris.items():
        local = job.channel_dir(channel)
        local.mkdir(parents=True, exist_ok=True)
        if not store.download_prefix(uri, local):
            raise StepFailed(f"{job.step_name}: channel {channel!r}: nothing at {uri}")
    restored = checkpoints.restore()
    if restored:
        out(f"    restored {restored} checkpoint file(s) from {job.checkpoint_uri}")
    job.model_dir.mkdir(parents=True, exist_ok=True)


def run_container_entrypoint(job: TrainingJob, out: Printer) -> None:
    """The request's ContainerEntrypoint, with `true` in place of its ContainerArguments (the image's own start,
    which this runner plays itself next): an entry command that fails stops the job before any of its code runs."""
    code = _stream(
        [*job.entrypoint, "true"],
        job.container.environment(job.environment),
        job.container.root,
        job.container.root / JOB_LOG,
        out,
    )
    if code != 0:
        raise StepFailed(f"{job.step_name}: the container's entry command exited with code {code} (messages above)")


def _training_environment(job: TrainingJob) -> dict[str, str]:
    """The training toolkit's variables for the entry point, container paths mapped into the job's folder."""
    return job.container.environment(
        {
            MODEL_DIR_ENV: str(job.model_dir),
            OUTPUT_DATA_DIR_ENV: str(job.container.path(OUTPUT_DATA_DIR)),
            "SM_CHANNELS": json.dumps(sorted(job.channel_uris)),
            "SM_HPS": json.dumps(job.hyperparameters),
            "SM_NUM_GPUS": "0",
            "SM_CURRENT_HOST": "algo-1",
            "SM_HOSTS": json.dumps(["algo-1"]),
            LOCAL_CHECKPOINT_DIR_ENV: str(job.checkpoint_dir),
            # TensorBoardOutputConfig.LocalPath, mapped into the job's folder like every container path.
            LOCAL_TENSORBOARD_DIR_ENV: str(job.container.path(TENSORBOARD_DIR)),
            # FineTune's node-local features when it tokenizes (train.py --tokenize_data), in the job's folder too.
            LOCAL_TOKENIZED_DIR_ENV: str(job.container.path(TOKENIZED_DIR)),
            "OMP_NUM_THREADS": "1" if job.processes > 1 else os.environ.get("OMP_NUM_THREADS", "2"),
            **{channel_env(channel): str(job.channel_dir(channel)) for channel in job.channel_uris},
            **job.environment,
        }
    )


@dataclass
class SpotReclaimWatch:
    """Reads the job's output; at the first line for which the interruption is due, SIGKILLs every process
    of the job and keeps that line."""

    interruption: SpotInterruption | None
    out: Printer
    reclaimed_after: str | None = None

    def __call__(self, line: str, proc: subprocess.Popen[str]) -> None:
        if self.interruption is None or self.reclaimed_after is not None or not self.interruption.due(line):
            return
        self.reclaimed_after = line.strip()
        killed = reclaim(proc.pid)
        self.out(f"    >> spot reclaim: SIGKILL to all {killed} processes of the job, just after: {line.strip()}")


def launch_training(
    job: TrainingJob, checkpoints: CheckpointSync, out: Printer, interruption: SpotInterruption | None
) -> str | None:
    """Run the entry point to its end while the checkpoint folder syncs to S3; the last line it logged before
    a spot reclaim killed it, or None when it completed. A failed job raises StepFailed."""
    if job.backend is not None:
        out(
            f"    {job.instance_count} x {job.instance_type} = {job.requested_processes} data-parallel processes "
            f"requested; running {job.processes} CPU process(es) with {job.backend} (capped to this machine's cores)"
        )
    command = [*launcher(job.processes), job.program, *hyperparameter_args(job.hyperparameters)]
    watch = SpotReclaimWatch(interruption, out)
    with checkpoints:
        code = _stream(command, _training_environment(job), job.code_dir, job.container.root / JOB_LOG, out, watch)
    if watch.reclaimed_after is None and code != 0:
        raise StepFailed(f"{job.step_name}: the training job exited with code {code} (its messages are above)")
    return watch.reclaimed_after


def final_metrics(definitions: list[dict[str, str]], log: str) -> list[dict[str, Any]]:
    """DescribeTrainingJob's FinalMetricDataList as SageMaker fills it: per metric definition, the value of the
    last log line its regex matches; metrics that never matched are absent
    (https://docs.aws.amazon.com/sagemaker/latest/dg/training-metrics.html)."""
    metrics = []
    for definition in definitions:
        values = re.findall(definition["Regex"], log)
        if values:
            metrics.append({"MetricName": definition["Name"], "Value": float(values[-1])})
    return metrics


def collect_model(job: TrainingJob, store: LocalObjectStore) -> dict[str, Any]:
    """Pack the model folder into model.tar.gz at the job's output path, as SageMaker uploads it, and the
    TensorBoard folder to its output path; the job's properties."""
    archive = job.container.root / "model.tar.gz"
    # Stored, not deflated: the weights are float tensors that gzip barely shrinks (79 of 86 MiB for the demo's
    # model) while deflating them took ~6 s of a warm `make demo` (bench/RESULTS.md section 8). Still a gzip
    # tar, read as SageMaker's model.tar.gz is.
    with tarfile.open(archive, "w:gz", compresslevel=0) as tar:
        for path in sorted(job.model_dir.iterdir()):
            tar.add(path, arcname=path.name)
    store.put_file(archive, job.artifact_uri)
    if job.tensorboard_uri and job.tensorboard_dir.is_dir():
        store.upload_dir(job.tensorboard_dir, job.tensorboard_uri)
    log = (job.container.root / JOB_LOG).read_text(encoding="utf-8", errors="replace")
    return {
        "ModelArtifacts": {"S3ModelArtifacts": job.artifact_uri},
        "TrainingJobName": job.job_name,
        "FinalMetricDataList": final_metrics(job.metric_definitions, log),
    }


def run_training(
    name: str,
    args: dict[str, Any],
    store: LocalObjectStore,
    job_dir: Path,
    job_name: str,
    out: Printer,
    interruption: SpotInterruption | None = None,
    hyperparameter_overrides: dict[str, str] | None = None,
) -> TrainingOutcome:
    """A TrainingStep's job as the HF training toolkit would run it (torchrun for data parallel): resolve the
    request, prepare the container's folders, launch the entry point, collect the model. One attempt: the
    runner retries a spot-reclaimed job on a fresh job folder."""
    job = resolve_training_job(name, args, job_dir, job_name, hyperparameter_overrides or {})
    checkpoints = CheckpointSync(store, job.checkpoint_dir, job.checkpoint_uri)
    try:
        prepare_container(job, store, checkpoints, out)
        interrupted_after = launch_training(job, checkpoints, out, interruption)
    finally:
        job.container.remove_temp_dir()
    if interrupted_after is not None:
        return TrainingOutcome(interrupted_after=interrupted_after, properties={})
    return TrainingOutcome(interrupted_after=None, properties=collect_model(job, store))
