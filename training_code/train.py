#!/usr/bin/env python3
"""Fine-tune an encoder for extractive QA with a Hugging Face Accelerate loop (training job).

Runs unchanged as 1 CPU process, N CPU processes (torchrun, gloo), 1 GPU, or many GPUs on many nodes
(torchrun + NCCL over EFA, or SageMaker's SMDDP launcher). Resumes from the newest complete checkpoint in
--checkpoint_dir, which SageMaker syncs with the job's checkpoint_s3_uri.

SageMaker contract: hyperparameters arrive as `--name value`; SM_CHANNEL_TRAIN holds the tokenized features
(preprocess.py), SM_CHANNEL_MODEL the base model weights + tokenizer, SM_MODEL_DIR receives the final model.
Each logging interval prints one line that the pipeline's metric definitions parse:
  step=120 epoch=0.500 loss=1.2345 learning_rate=2.500e-05 samples_per_second=321.00
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from qa.cli import env_path, setup_logging, str2bool
from qa.distributed import prepare_environment

EXIT_INTERRUPTED = 143  # 128 + SIGTERM: stopped after saving a checkpoint; a retry resumes from it


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    paths = parser.add_argument_group("paths (SageMaker defaults)")
    paths.add_argument("--model_name_or_path", default=env_path("SM_CHANNEL_MODEL", "/opt/ml/input/data/model"))
    paths.add_argument("--train_dir", type=Path, default=Path(env_path("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train")))
    paths.add_argument("--output_dir", type=Path, default=Path(env_path("SM_MODEL_DIR", "/opt/ml/model")))
    # SageMaker syncs /opt/ml/checkpoints with checkpoint_s3_uri; QA_CHECKPOINT_DIR moves it (local runs).
    paths.add_argument(
        "--checkpoint_dir", type=Path, default=Path(env_path("QA_CHECKPOINT_DIR", "/opt/ml/checkpoints"))
    )
    hps = parser.add_argument_group("hyperparameters")
    hps.add_argument("--epochs", type=float, default=2.0)
    hps.add_argument("--max_steps", type=int, default=-1, help="stop after this many optimizer steps (-1: epochs)")
    hps.add_argument("--learning_rate", type=float, default=3e-5)
    hps.add_argument("--per_device_train_batch_size", type=int, default=8)
    hps.add_argument("--gradient_accumulation_steps", type=int, default=1)
    hps.add_argument("--precision", choices=("bf16", "fp16", "no"), default="bf16")
    hps.add_argument("--warmup_ratio", type=float, default=0.1)
    hps.add_argument("--weight_decay", type=float, default=0.01)
    hps.add_argument("--max_grad_norm", type=float, default=1.0)
    hps.add_argument("--seed", type=int, default=42)
    hps.add_argument("--logging_steps", type=int, default=50)
    hps.add_argument("--checkpoint_steps", type=int, default=500)
    hps.add_argument("--keep_checkpoints", type=int, default=2)
    hps.add_argument("--group_by_length", type=str2bool, default=True)
    hps.add_argument("--dataloader_num_workers", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare_environment()

    import torch
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, set_seed
    from qa import checkpoints
    from qa.base_model import load_question_answering_model
    from qa.training import (
        DynamicPaddingCollator,
        FeatureDataset,
        LengthGroupedSampler,
        StopRequest,
        build_optimizer,
        capture_rng,
        parameter_digest,
        resolve_precision,
        restore_rng,
        steps_per_epoch,
    )
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    stop = StopRequest()
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(),
        mixed_precision=resolve_precision(args.precision),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
    )
    log = setup_logging(accelerator.is_main_process)
    world, rank = accelerator.num_processes, accelerator.process_index
    log.info(
        "distributed=%s processes=%d device=%s precision=%s",
        accelerator.distributed_type,
        world,
        accelerator.device,
        accelerator.mixed_precision,
    )
    set_seed(args.seed)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True

    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    model = load_question_answering_model(args.model_name_or_path, log)
    dataset = FeatureDataset.from_parquet(args.train_dir)
    global_batch = args.per_device_train_batch_size * world * args.gradient_accumulation_steps
    sampler = LengthGroupedSampler(dataset.lengths, group_size=global_batch, seed=args.seed, shuffle=True)
    # Multiples of 8 keep tensor-core shapes on GPUs.
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer, 8 if torch.cuda.is_available() else None)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.per_device_train_batch_size,
        sampler=sampler if args.group_by_length else None,
        shuffle=not args.group_by_length,
        collate_fn=collator,
        num_workers=args.dataloader_num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    optimizer = build_optimizer(model, args.learning_rate, args.weight_decay)
    # Sizes per process: Accelerate shards the batches across processes.
    updates_per_epoch = steps_per_epoch(math.ceil(len(loader) / world), args.gradient_accumulation_steps)
    total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.epochs * updates_per_epoch)
    warmup_steps = math.ceil(args.warmup_ratio * total_steps)
    # Accelerate steps a prepared scheduler once per process per optimizer step: scale both counts by it.
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps * world, total_steps * world)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    global_step, start_epoch, skip_batches, samples_seen = 0, 0, 0, 0
    resume_rng = None
    latest = checkpoints.find_latest_complete(args.checkpoint_dir, world)
    if latest is not None:
        accelerator.load_state(str(latest))
        if not (latest / f"random_states_{rank}.pkl").is_file():
            log.warning("checkpoint %s has no RNG state for rank %d: dropout will differ", latest.name, rank)
        state = checkpoints.read_loop_state(latest, rank)
        global_step, start_epoch, skip_batches = state.global_step, state.epoch, state.batches_in_epoch
        samples_seen = state.samples_seen
        # Creating the resumed iterator draws from the RNG; re-apply the saved state after its first batch.
        resume_rng = capture_rng() if skip_batches else None
        log.info(
            "resumed from %s: step %d, epoch %d, batch %d of the epoch",
            latest.name,
            global_step,
            start_epoch,
            skip_batches,
        )
    log.info(
        "training: %d features, %d optimizer steps (%d per epoch), global batch %d, warmup %d",
        len(dataset),
        total_steps,
        updates_per_epoch,
        global_batch,
        warmup_steps,
    )

    def save_checkpoint(epoch: int, batches_in_epoch: int) -> None:
        partial = checkpoints.partial_dir(args.checkpoint_dir, global_step)
        partial.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in partial.iterdir()}
        accelerator.wait_for_everyone()
        accelerator.save_state(str(partial), safe_serialization=True)
        state = checkpoints.LoopState(global_step, epoch, batches_in_epoch, samples_seen)
        checkpoints.write_rank_manifest(partial, rank, state, before)
        accelerator.wait_for_everyone()
        if accelerator.is_local_main_process:
            checkpoints.publish(args.checkpoint_dir, global_step)
            checkpoints.prune(args.checkpoint_dir, args.keep_checkpoints)
        accelerator.wait_for_everyone()
        log.info("checkpoint saved: step %d", global_step)

    def log_metrics(interval_loss: torch.Tensor, batches: int, elapsed: float) -> None:
        mean_loss = accelerator.reduce(interval_loss, reduction="mean").item() / max(1, batches)
        samples = batches * args.per_device_train_batch_size * world
        if accelerator.is_main_process:
            print(
                f"step={global_step} epoch={global_step / updates_per_epoch:.3f} loss={mean_loss:.4f} "
                f"learning_rate={scheduler.get_last_lr()[0]:.3e} samples_per_second={samples / elapsed:.2f}",
                flush=True,
            )

    progress = tqdm(
        total=total_steps, initial=global_step, disable=not (accelerator.is_main_process and sys.stderr.isatty())
    )
    model.train()
    batches_per_epoch = len(loader)  # this process's share, after prepare()
    interval_loss = torch.zeros((), device=accelerator.device)
    interval_batches, interval_start = 0, time.perf_counter()
    epoch, interrupted = start_epoch, False
    while global_step < total_steps and not interrupted:
        epoch_loader = accelerator.skip_first_batches(loader, skip_batches) if skip_batches else loader
        # Accelerate re-seeds the sampler with the loader's own iteration count: keep both at `epoch`.
        epoch_loader.set_epoch(epoch)
        sampler.set_epoch(epoch)
        batches_in_epoch, skip_batches = skip_batches, 0
        for batch in epoch_loader:
            if resume_rng is not None:
                restore_rng(resume_rng)
                resume_rng = None
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            batches_in_epoch += 1
            interval_loss += loss.detach()
            interval_batches += 1
            if not accelerator.sync_gradients:
                continue
            global_step += 1
            samples_seen += global_batch
            progress.update(1)
            if global_step % args.logging_steps == 0 or global_step == total_steps:
                log_metrics(interval_loss, interval_batches, time.perf_counter() - interval_start)
                interval_loss.zero_()
                interval_batches, interval_start = 0, time.perf_counter()
            stop_now = accelerator.reduce(
                torch.tensor(float(stop.requested), device=accelerator.device), reduction="sum"
            ).item()
            if stop_now or global_step % args.checkpoint_steps == 0:
                # A checkpoint at the end of an epoch resumes at the start of the next one.
                at_end = batches_in_epoch >= batches_per_epoch
                save_checkpoint(epoch + 1 if at_end else epoch, 0 if at_end else batches_in_epoch)
            if stop_now:
                log.warning("stop requested (SIGTERM): checkpoint at step %d saved, exiting", global_step)
                interrupted = True
                break
            if global_step >= total_steps:
                break
        epoch += 1
    progress.close()
    if interrupted:
        accelerator.end_training()
        return EXIT_INTERRUPTED

    # Every rank prints a digest of its parameters: data-parallel replicas must agree bit for bit.
    # One write per line: ranks share stdout, and a single short write is not interleaved.
    sys.stdout.write(f"rank={rank} parameter_sha256={parameter_digest(accelerator.unwrap_model(model))}\n")
    sys.stdout.flush()
    accelerator.wait_for_everyone()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    unwrapped = accelerator.unwrap_model(model)
    unwrapped.save_pretrained(
        args.output_dir,
        is_main_process=accelerator.is_main_process,
        save_function=accelerator.save,
        state_dict=accelerator.get_state_dict(model),
        safe_serialization=True,
    )
    if accelerator.is_main_process:
        tokenizer.save_pretrained(args.output_dir)
        summary = {"global_step": global_step, "samples_seen": samples_seen, "processes": world}
        (args.output_dir / "training_summary.json").write_text(json.dumps(summary, indent=2))
        log.info("model saved to %s", args.output_dir)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
