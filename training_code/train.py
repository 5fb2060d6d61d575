#!/usr/bin/env python3
"""Fine-tune an encoder for a task (--task: extractive QA, text or token classification) with a Hugging Face
Accelerate loop (training job).

Runs unchanged as 1 CPU process, N CPU processes (torchrun, gloo), 1 GPU, or many GPUs on many nodes
(torchrun + NCCL over EFA, or SageMaker's SMDDP launcher). Resumes from the newest complete checkpoint in
--checkpoint_dir, which SageMaker syncs with the job's checkpoint_s3_uri. Checkpoints are taken every
--checkpoint_minutes of training, every --checkpoint_steps and/or every --checkpoint_epochs (each 0: off):
on SageMaker a spot reclaim ends the job without a signal the script sees, so the job resumes from the last
periodic checkpoint.

SageMaker contract: hyperparameters arrive as `--name value`; SM_CHANNEL_TRAIN holds the tokenized features
(preprocess.py), SM_CHANNEL_VALIDATION the validation features and examples, SM_CHANNEL_MODEL the base model
weights + tokenizer, SM_MODEL_DIR receives the final model. With --tokenize_data true (processing.tokenize_in =
"fine_tune") there are no feature channels: one process per node validates and tokenizes SM_CHANNEL_DATA (the pinned
dataset) as preprocess.py does, before the process group starts, and prints
  tokenized 1234 examples -> 1300 features in 2.1 s on 8 processes
or preprocess.py's lines for a refused dataset and exits 1. Each logging interval prints one line that the
pipeline's metric definitions parse:
  step=120 epoch=0.500 loss=1.2345 learning_rate=2.500e-05 samples_per_second=321.00
With --evaluation_strategy steps (every --evaluation_steps) or epoch, the validation set is also scored during
training (its loss, EM and F1 in the curves, and a line `evaluation during training: step=...`); the best F1's
checkpoint is kept and becomes the model, and --early_stopping_patience N ends training after N evaluations without
a better F1. --stop_after_seconds ends training early enough to evaluate and save within the job's MaxRuntime.
After training, every process evaluates its share of the validation set (the task's METRICS, e.g. SQuAD EM/F1) with
the model kept; the main process prints
  evaluation: exact_match=80.1234 f1=88.5678
then, with a benchmark channel (SM_CHANNEL_BENCHMARK, the operator's benchmark: the pipeline's gate), the same for it:
  benchmark: exact_match=79.0000 f1=87.0000
and writes evaluation.json into the model dir and predictions.json into SM_OUTPUT_DATA_DIR. The training curves
(loss, learning rate, gradient norm, throughput, evaluation) go to TensorBoard event files under
/opt/ml/output/tensorboard and to log_history.json beside the model.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from qa import node_features
from qa.cli import auto_bool, channel_path, env_path, number, or_auto, setup_logging, str2bool, task_name
from qa.distributed import prepare_environment, request_nccl_debug, unusable_gpus_error
from qa.outputs import (
    BENCHMARK_CHANNEL,
    BENCHMARK_DATA_CHANNEL,
    BENCHMARK_OUTPUT,
    CHECKPOINT_DIR,
    DATA_CHANNEL,
    LOCAL_CHECKPOINT_DIR_ENV,
    LOCAL_TENSORBOARD_DIR_ENV,
    LOCAL_TOKENIZED_DIR_ENV,
    MODEL_CHANNEL,
    MODEL_DIR,
    MODEL_DIR_ENV,
    OUTPUT_DATA_DIR,
    OUTPUT_DATA_DIR_ENV,
    PINNED_MANIFEST_FILE,
    PREDICTIONS_FILE,
    TENSORBOARD_DIR,
    TENSORBOARD_RUN,
    TOKENIZED_DIR,
    TOKENIZED_LINE,
    TRAIN_CHANNEL,
    TRAIN_SPLIT,
    VALIDATION_CHANNEL,
    VALIDATION_SPLIT,
)
from tasks import DEFAULT_TASK

# preprocess.py's options that --tokenize_data passes on when set (train.py's flag names, underscores for dashes).
TOKENIZE_OPTIONS = (
    "task",
    "max_seq_length",
    "doc_stride",
    "max_windows_per_example",
    "skip_invalid",
    "manifest_version",
    "benchmark_sha256",
)
EXIT_INTERRUPTED = 143  # 128 + SIGTERM: stopped after saving a checkpoint; a retry resumes from it


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", type=task_name, default=DEFAULT_TASK, help="the pipeline's task (tasks.TASK_NAMES)")
    paths = parser.add_argument_group("paths (SageMaker defaults)")
    paths.add_argument("--model_name_or_path", default=str(channel_path(MODEL_CHANNEL)))
    paths.add_argument("--train_dir", type=Path, default=channel_path(TRAIN_CHANNEL))
    paths.add_argument(
        "--validation_dir",
        type=Path,
        default=channel_path(VALIDATION_CHANNEL),
        help="validation features + examples (preprocess.py); a missing folder: no evaluation",
    )
    paths.add_argument(
        "--benchmark_dir",
        type=Path,
        default=channel_path(BENCHMARK_CHANNEL),
        help="the operator's benchmark features + examples (preprocess.py), scored after the validation set for "
        "the pipeline's gate; a missing folder: no benchmark",
    )
    paths.add_argument("--output_dir", type=Path, default=Path(env_path(MODEL_DIR_ENV, MODEL_DIR)))
    paths.add_argument(
        "--output_data_dir",
        type=Path,
        default=Path(env_path(OUTPUT_DATA_DIR_ENV, OUTPUT_DATA_DIR)),
        help=f"{PREDICTIONS_FILE} (uploaded as output.tar.gz, not in model.tar.gz)",
    )
    # SageMaker uploads TENSORBOARD_DIR to TensorBoardOutputConfig.S3OutputPath; LOCAL_TENSORBOARD_DIR_ENV moves it.
    paths.add_argument(
        "--tensorboard_dir",
        type=Path,
        default=Path(env_path(LOCAL_TENSORBOARD_DIR_ENV, TENSORBOARD_DIR)),
        help=f"TensorBoard event files of the training curves, in <dir>/{TENSORBOARD_RUN}/ (main process)",
    )
    # SageMaker syncs CHECKPOINT_DIR with checkpoint_s3_uri; LOCAL_CHECKPOINT_DIR_ENV moves it (local runs).
    paths.add_argument("--checkpoint_dir", type=Path, default=Path(env_path(LOCAL_CHECKPOINT_DIR_ENV, CHECKPOINT_DIR)))
    hps = parser.add_argument_group("hyperparameters")
    hps.add_argument("--epochs", type=number(float, 0, low_exclusive=True), default=2.0)
    hps.add_argument(
        "--max_steps", type=number(int, 1, also=(-1,)), default=-1, help="stop after N optimizer steps (-1: epochs)"
    )
    hps.add_argument(
        "--learning_rate",
        type=or_auto(number(float, 0, low_exclusive=True)),
        default="auto",
        help="auto: the published recipe's for the global batch on GPUs (qa/recipe.py), 3e-5 on CPU",
    )
    hps.add_argument(
        "--per_device_train_batch_size",
        type=or_auto(number(int, 1)),
        default="auto",
        help="auto: the largest power of two up to the recipe's 32 that fits this GPU (qa/memory.py); 8 on CPU",
    )
    hps.add_argument("--gradient_accumulation_steps", type=number(int, 1), default=1)
    hps.add_argument(
        "--eval_batch_size", type=number(int, 1), default=32, help="validation features per forward pass and process"
    )
    hps.add_argument("--precision", choices=("bf16", "fp16", "no"), default="bf16")
    hps.add_argument(
        "--warmup_ratio",
        type=or_auto(number(float, 0, 1)),
        default="auto",
        help="auto: the recipe's 0.2 on GPUs, 0.1 on CPU",
    )
    hps.add_argument("--weight_decay", type=number(float, 0), default=0.01)
    hps.add_argument("--max_grad_norm", type=number(float, 0, low_exclusive=True), default=1.0)
    hps.add_argument("--seed", type=int, default=42)
    hps.add_argument("--logging_steps", type=number(int, 1), default=50)
    hps.add_argument(
        "--checkpoint_minutes", type=number(float, 0), default=15.0, help="checkpoint every N training minutes (0: off)"
    )
    hps.add_argument(
        "--checkpoint_steps", type=number(int, 0), default=0, help="checkpoint every N optimizer steps (0: off)"
    )
    hps.add_argument(
        "--checkpoint_epochs",
        type=number(int, 0),
        default=0,
        help="checkpoint at the end of every N-th epoch but the last (0: off; 1: once per epoch). No periodic "
        "checkpoints at all: --checkpoint_minutes 0 --checkpoint_steps 0 --checkpoint_epochs 0",
    )
    hps.add_argument("--keep_checkpoints", type=number(int, 1), default=2)
    hps.add_argument(
        "--evaluation_strategy",
        choices=("no", "steps", "epoch"),
        default="no",
        help="score the validation set during training too: every --evaluation_steps, or at each epoch's end (and "
        "at the last step); no: only the final evaluation",
    )
    hps.add_argument("--evaluation_steps", type=number(int, 1), default=500)
    hps.add_argument(
        "--early_stopping_patience",
        type=number(int, 0),
        default=0,
        help="stop after N evaluations during training without a better validation F1 (0: off); the best one's "
        "checkpoint is the model either way",
    )
    hps.add_argument(
        "--stop_after_seconds",
        type=number(float, 0),
        default=0.0,
        help="end training at the first --control_steps vote after N seconds since the job started, then evaluate "
        "and save (0: off; the pipeline passes MaxRuntimeInSeconds less the time to evaluate, save and upload)",
    )
    hps.add_argument(
        "--control_steps",
        type=number(int, 0),
        default=10,
        help="every N optimizer steps the ranks agree (one small all-reduce) on a pending SIGTERM and a due timed "
        "checkpoint; 0: never (SIGTERM is then not caught and --checkpoint_minutes is ignored)",
    )
    hps.add_argument("--group_by_length", type=str2bool, default=True)
    hps.add_argument(
        "--compile",
        type=auto_bool,
        default="auto",
        help="torch.compile the model, dynamic shapes (auto: off here; the pipeline passes true or false, decided "
        "by qa.cost.compile_pays from the cost estimate's compute time: config/costs.py compile_hyperparameter)",
    )
    hps.add_argument(
        "--dataloader_num_workers",
        type=number(int, -1),
        default=-1,
        help="collating processes (-1: 2 on GPU, 0 on CPU)",
    )
    hps.add_argument(
        "--nccl_debug", type=str2bool, default=False, help="NCCL_DEBUG=INFO: logs name NCCL's network plugin (EFA)"
    )
    tokenize = parser.add_argument_group(
        "tokenization in the training job (--tokenize_data true: processing.tokenize_in = fine_tune)",
        "one process per node validates and tokenizes the data channel (ClaimManifest's pinned folder) with the "
        "model channel's tokenizer, as preprocess.py does, into --tokenized_dir; training then reads those features "
        "instead of --train_dir, --validation_dir and --benchmark_dir. Unset values: preprocess.py's defaults",
    )
    tokenize.add_argument("--tokenize_data", type=str2bool, default=False)
    tokenize.add_argument("--data_dir", type=Path, default=channel_path(DATA_CHANNEL))
    tokenize.add_argument(
        "--benchmark_data_dir",
        type=Path,
        default=channel_path(BENCHMARK_DATA_CHANNEL),
        help="the pinned benchmark's folder (manifest and files), verified against --benchmark_sha256",
    )
    tokenize.add_argument("--tokenized_dir", type=Path, default=Path(env_path(LOCAL_TOKENIZED_DIR_ENV, TOKENIZED_DIR)))
    tokenize.add_argument("--max_seq_length", type=number(int, 1))
    tokenize.add_argument("--doc_stride", type=number(int, 0))
    tokenize.add_argument("--max_windows_per_example", type=number(int, 1))
    tokenize.add_argument("--skip_invalid", type=str2bool)
    tokenize.add_argument("--manifest_version")
    tokenize.add_argument("--benchmark_sha256")
    return parser.parse_args(argv)


def preprocess_argv(args: argparse.Namespace) -> list[str]:
    """preprocess.py's arguments for this job's data channel, tokenizer and node-local output folder."""
    argv = [
        *("--manifest", str(args.data_dir / PINNED_MANIFEST_FILE), "--data-dir", str(args.data_dir)),
        *("--tokenizer-dir", args.model_name_or_path, "--output-dir", str(args.tokenized_dir)),
    ]
    if args.benchmark_sha256:
        argv += ["--benchmark-dir", str(args.benchmark_data_dir)]
    for name in TOKENIZE_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def tokenize_on_node(args: argparse.Namespace) -> bool:
    """--tokenize_data: this node's features, tokenized by its local rank 0 (the fork pool of preprocess.py on all
    vCPUs: before torch or CUDA start), the other local ranks waiting for its marker; then training reads them.
    False, after printing why (preprocess.py's lines for a refused dataset), when there are none."""
    directory, launch = args.tokenized_dir, node_features.launch_id(os.environ)
    if node_features.tokenizes_here(os.environ):
        import preprocess

        node_features.start(directory)
        tokenized = None
        try:
            tokenized = preprocess.validate_and_tokenize(preprocess.parse_args(preprocess_argv(args)), setup_logging())
        finally:
            node_features.mark(directory, tokenized is not None, launch)
        if tokenized is None:
            return False
        print(
            TOKENIZED_LINE.format(
                examples=tokenized.examples,
                features=tokenized.features,
                seconds=tokenized.seconds,
                processes=tokenized.processes,
            ),
            flush=True,
        )
    else:
        problem = node_features.wait(directory, launch)
        if problem:
            print(f"error: {problem}", file=sys.stderr, flush=True)
            return False
    args.train_dir = directory / TRAIN_SPLIT
    args.validation_dir = directory / VALIDATION_SPLIT
    args.benchmark_dir = directory / BENCHMARK_OUTPUT  # written only with --benchmark_sha256
    return True


def main(argv: list[str] | None = None) -> int:
    """Build, resume from the newest complete checkpoint, train, keep the best evaluated model, evaluate, save;
    143 when a SIGTERM stopped training (nothing evaluated or saved then)."""
    started = time.monotonic()  # --stop_after_seconds counts from here: tokenization counts too
    args = parse_args(argv)
    prepare_environment()  # LOCAL_RANK under mpirun too, which tokenize_on_node reads
    # Tokenization forks its pool before anything touches CUDA (the GPU check initialises it).
    if args.tokenize_data and not tokenize_on_node(args):
        return 1
    unusable = unusable_gpus_error()
    if unusable:
        print(f"error: {unusable}", file=sys.stderr, flush=True)
        return 1
    if args.nccl_debug:
        request_nccl_debug(os.environ)

    # torch, Accelerate and transformers load only to train (not for --help), after the launcher is translated.
    from qa import fine_tune
    from qa.loop_control import Deadline

    run = fine_tune.build(args)
    if run is None:
        return 1
    progress = fine_tune.resume(run.accelerator, args.checkpoint_dir)
    ended = fine_tune.train(run, progress, Deadline(args.stop_after_seconds, started))
    if ended != fine_tune.INTERRUPTED:
        model_step = fine_tune.restore_best(run, progress)
        fine_tune.evaluate(run, progress, model_step)
        fine_tune.save(run, progress, model_step, ended)
    run.accelerator.end_training()
    return EXIT_INTERRUPTED if ended == fine_tune.INTERRUPTED else 0


if __name__ == "__main__":
    sys.exit(main())
