"""Start the training entry point as SageMaker would (CLI hyperparameters, SM_* variables), 1 or N processes."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from qa.evaluation import Evaluation, ValidationSet, length_sorted_batches, score
from qa.outputs import LOCAL_CHECKPOINT_DIR_ENV, LOCAL_TENSORBOARD_DIR_ENV, VALIDATION_CHANNEL

from config.paths import TRAINING_CODE
from local_runner.launch import hyperparameter_args, job_environment, launcher
from local_runner.spot import reclaim
from tests.conftest import ENTRY_POINT_PYTHONPATH

INSTRUMENTED = Path(__file__).with_name("instrumented_train.py")


@dataclass
class TrainRun:
    returncode: int
    output: str

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith(prefix)]

    def metric(self, name: str) -> list[str]:
        return [part.split("=", 1)[1] for line in self.lines("step=") for part in line.split() if part.startswith(name)]


def train_env(model_dir: Path, features_dir: Path, work: Path) -> dict[str, str]:
    """The SageMaker channels and folders of one run, in this process's environment less any outer job's. The
    validation channel is given when `features_dir` has one (SageMaker creates each channel's folder)."""
    return {
        **job_environment(),
        "SM_CHANNEL_MODEL": str(model_dir),
        "SM_CHANNEL_TRAIN": str(features_dir / "train"),
        **(
            {f"SM_CHANNEL_{VALIDATION_CHANNEL.upper()}": str(features_dir / VALIDATION_CHANNEL)}
            if (features_dir / VALIDATION_CHANNEL).is_dir()
            else {}
        ),
        "SM_MODEL_DIR": str(work / "model"),
        "SM_OUTPUT_DATA_DIR": str(work / "output-data"),
        LOCAL_CHECKPOINT_DIR_ENV: str(work / "checkpoints"),
        LOCAL_TENSORBOARD_DIR_ENV: str(work / "tensorboard"),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def run_training(
    model_dir: Path,
    features_dir: Path,
    work: Path,
    hyperparameters: Mapping[str, object],
    processes: int = 1,
    sigterm_at_step: int | None = None,
    kill_when: Callable[[str], bool] | None = None,
    instrument: dict[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> TrainRun:
    """Run train.py to the end; or send SIGTERM once it logs `step=<sigterm_at_step>`; or SIGKILL all its
    processes (a spot reclaim) at the first line for which `kill_when` is true. `instrument`: run it under
    instrumented_train.py with these variables. `extra_env`: more variables for the job."""
    env = {**train_env(model_dir, features_dir, work), **(extra_env or {})}
    if instrument is not None:
        env.update(instrument, PYTHONPATH=ENTRY_POINT_PYTHONPATH)  # the instrumented script imports train.py
    script = str(INSTRUMENTED) if instrument is not None else "train.py"
    proc = subprocess.Popen(
        [*launcher(processes), script, *hyperparameter_args(hyperparameters)],
        cwd=TRAINING_CODE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = []
    assert proc.stdout is not None
    for line in proc.stdout:
        output.append(line)
        if sigterm_at_step is not None and line.startswith(f"step={sigterm_at_step} "):
            proc.send_signal(signal.SIGTERM)  # torchrun forwards it to every worker
            sigterm_at_step = None
        if kill_when is not None and kill_when(line):
            output.append(f"-- SIGKILL to {reclaim(proc.pid)} processes\n")
            kill_when = None
    return TrainRun(proc.wait(timeout=600), "".join(output))


def load_weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def single_process_evaluation(model_dir: Path, validation_dir: Path, batch_size: int) -> Evaluation:
    """What one process computes of a saved QA model on a validation channel: every length-sorted batch, in order,
    scored as the training job scores them (qa.evaluation)."""
    from qa.answering import QuestionAnswerer
    from qa.batching import DynamicPaddingCollator, model_outputs
    from tasks import question_answering

    validation = ValidationSet.load(validation_dir)
    answerer = QuestionAnswerer(model_dir, "cpu")
    batches = length_sorted_batches(validation.features, batch_size)
    collator = DynamicPaddingCollator.for_tokenizer(answerer.tokenizer)
    task = question_answering
    outputs = model_outputs(answerer.model, collator, validation.features, batches, "cpu", task.feature_output)
    return score(task, validation, [output for _, output in sorted(outputs, key=lambda pair: pair[0])], None)
