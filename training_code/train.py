#!/usr/bin/env python3
"""Fine-tune an encoder for extractive QA with a Hugging Face Accelerate loop (training job).

Runs unchanged as 1 CPU process, N CPU processes (torchrun, gloo), 1 GPU, or many GPUs on many nodes
(torchrun + NCCL over EFA, or SageMaker's SMDDP launcher). Resumes from the newest complete checkpoint in
--checkpoint_dir, which SageMaker syncs with the job's checkpoint_s3_uri. Checkpoints are taken every
--checkpoint_minutes of training, every --checkpoint_steps and/or every --checkpoint_epochs (each 0: off):
on SageMaker a spot reclaim ends the job without a signal the script sees, so the job resumes from the last
periodic checkpoint.

SageMaker contract: hyperparameters arrive as `--name value`; SM_CHANNEL_TRAIN holds the tokenized features
(preprocess.py), SM_CHANNEL_VALIDATION the validation features and examples, SM_CHANNEL_MODEL the base model
weights + tokenizer, SM_MODEL_DIR receives the final model. Each logging interval prints one line that the
pipeline's metric definitions parse:
  step=120 epoch=0.500 loss=1.2345 learning_rate=2.500e-05 samples_per_second=321.00
After training, every process evaluates its share of the validation set (SQuAD EM/F1); the main process prints
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
from pathlib import Path

from qa.cli import auto_bool, channel_path, env_path, number, or_auto, str2bool
from qa.distributed import prepare_environment, request_nccl_debug, unusable_gpus_error
from qa.outputs import (
    BENCHMARK_CHANNEL,
    CHECKPOINT_DIR,
    LOCAL_CHECKPOINT_DIR_ENV,
    LOCAL_TENSORBOARD_DIR_ENV,
    MODEL_CHANNEL,
    MODEL_DIR,
    MODEL_DIR_ENV,
    OUTPUT_DATA_DIR,
    OUTPUT_DATA_DIR_ENV,
    PREDICTIONS_FILE,
    TENSORBOARD_DIR,
    TENSORBOARD_RUN,
    TRAIN_CHANNEL,
    VALIDATION_CHANNEL,
)

EXIT_INTERRUPTED = 143  # 128 + SIGTERM: stopped after saving a checkpoint; a retry resumes from it


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build, resume from the newest complete checkpoint, train, evaluate, save; 143 when a SIGTERM stopped
    training (nothing evaluated or saved then)."""
    args = parse_args(argv)
    unusable = unusable_gpus_error()
    if unusable:
        print(f"error: {unusable}", file=sys.stderr, flush=True)
        return 1
    prepare_environment()
    if args.nccl_debug:
        request_nccl_debug(os.environ)

    # torch, Accelerate and transformers load only to train (not for --help), after the launcher is translated.
    from qa import fine_tune

    run = fine_tune.build(args)
    if run is None:
        return 1
    progress = fine_tune.resume(run.accelerator, args.checkpoint_dir)
    interrupted = fine_tune.train(run, progress)
    if not interrupted:
        fine_tune.evaluate(run, progress)
        fine_tune.save(run, progress)
    run.accelerator.end_training()
    return EXIT_INTERRUPTED if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
