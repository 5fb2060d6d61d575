#!/usr/bin/env python3
"""Fine-tune an encoder for extractive QA with a Hugging Face Accelerate loop (training job).

Runs unchanged as 1 CPU process, N CPU processes (torchrun, gloo), 1 GPU, or many GPUs on many nodes
(torchrun + NCCL over EFA, or SageMaker's SMDDP launcher). Resumes from the newest complete checkpoint in
--checkpoint_dir, which SageMaker syncs with the job's checkpoint_s3_uri. Checkpoints are taken every
--checkpoint_minutes of training (and/or every --checkpoint_steps): on SageMaker a spot reclaim ends the job
without a signal the script sees, so the job resumes from the last periodic checkpoint.

SageMaker contract: hyperparameters arrive as `--name value`; SM_CHANNEL_TRAIN holds the tokenized features
(preprocess.py), SM_CHANNEL_MODEL the base model weights + tokenizer, SM_MODEL_DIR receives the final model.
Each logging interval prints one line that the pipeline's metric definitions parse:
  step=120 epoch=0.500 loss=1.2345 learning_rate=2.500e-05 samples_per_second=321.00
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from qa.cli import env_path, setup_logging, str2bool
from qa.distributed import prepare_environment, request_nccl_debug

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
    hps.add_argument(
        "--checkpoint_minutes", type=float, default=15.0, help="checkpoint every N minutes of training (0: off)"
    )
    hps.add_argument("--checkpoint_steps", type=int, default=0, help="checkpoint every N optimizer steps (0: off)")
    hps.add_argument("--keep_checkpoints", type=int, default=2)
    hps.add_argument(
        "--control_steps",
        type=int,
        default=10,
        help="every N optimizer steps the ranks agree (one small all-reduce) on a pending SIGTERM and a due timed "
        "checkpoint; 0: never (SIGTERM is then not caught and --checkpoint_minutes is ignored)",
    )
    hps.add_argument("--group_by_length", type=str2bool, default=True)
    hps.add_argument(
        "--dataloader_num_workers", type=int, default=-1, help="collating processes (-1: 2 on GPUs, 0 on CPU)"
    )
    hps.add_argument(
        "--nccl_debug", type=str2bool, default=False, help="NCCL_DEBUG=INFO: logs name NCCL's network plugin (EFA)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare_environment()
    if args.nccl_debug:
        request_nccl_debug(os.environ)

    import inference
    import torch
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DataLoaderConfiguration, set_seed
    from qa import checkpoints
    from qa.base_model import load_question_answering_model
    from qa.distributed import ddp_kwargs, describe_ddp
    from qa.features import length_limit_error
    from qa.training import (
        CheckpointTimer,
        DynamicPaddingCollator,
        FeatureDataset,
        LengthGroupedSampler,
        StopRequest,
        any_rank,
        build_optimizer,
        capture_rng,
        parameter_digest,
        resolve_precision,
        restore_rng,
        steps_per_epoch,
    )
    from tqdm.auto import tqdm
    from transformers import AutoConfig, AutoTokenizer, get_linear_schedule_with_warmup

    cuda = torch.cuda.is_available()
    stop = StopRequest() if args.control_steps > 0 else None
    PartialState(cpu=not cuda)  # initialises the process group: its backend decides the DDP settings
    backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    precision = resolve_precision(args.precision)
    accelerator = Accelerator(
        cpu=not cuda,
        mixed_precision=precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        # non_blocking: host-to-device copies from pinned memory overlap the running step.
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, non_blocking=cuda),
        kwargs_handlers=[ddp_kwargs(backend, precision)],
    )
    log = setup_logging(accelerator.is_main_process)
    world, rank = accelerator.num_processes, accelerator.process_index
    log.info(
        "distributed=%s backend=%s world_size=%d device=%s precision=%s",
        accelerator.distributed_type,
        backend or "none",
        world,
        accelerator.device,
        accelerator.mixed_precision,
    )
    set_seed(args.seed)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True

    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    dataset = FeatureDataset.from_parquet(args.train_dir)
    config = AutoConfig.from_pretrained(args.model_name_or_path)
    too_long = length_limit_error(max(dataset.lengths), tokenizer, config, "the longest training feature")
    if too_long:
        print(f"error: {too_long}", file=sys.stderr, flush=True)
        return 1
    model = load_question_answering_model(args.model_name_or_path, log)
    global_batch = args.per_device_train_batch_size * world * args.gradient_accumulation_steps
    sampler = LengthGroupedSampler(dataset.lengths, group_size=global_batch, seed=args.seed, shuffle=True)
    # Multiples of 8 keep tensor-core shapes on GPUs.
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer, 8 if cuda else None)
    # On GPUs, collation runs in worker processes into pinned memory, off the training thread.
    workers = args.dataloader_num_workers if args.dataloader_num_workers >= 0 else (2 if cuda else 0)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.per_device_train_batch_size,
        sampler=sampler if args.group_by_length else None,
        shuffle=not args.group_by_length,
        collate_fn=collator,
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=cuda,
    )
    optimizer = build_optimizer(model, args.learning_rate, args.weight_decay)
    # Sizes per process: Accelerate shards the batches across processes.
    updates_per_epoch = steps_per_epoch(math.ceil(len(loader) / world), args.gradient_accumulation_steps)
    total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.epochs * updates_per_epoch)
    warmup_steps = math.ceil(args.warmup_ratio * total_steps)
    # Accelerate steps a prepared scheduler once per process per optimizer step: scale both counts by it.
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps * world, total_steps * world)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        log.info("ddp: %s", describe_ddp(model))

    global_step, start_epoch, skip_batches, samples_seen = 0, 0, 0, 0
    resume_rng = None
    complete_steps: list[int] = []  # checkpoints known complete: the resumed one and those saved by this run
    latest = checkpoints.find_latest_complete(args.checkpoint_dir, world)
    if latest is not None:
        accelerator.load_state(str(latest))
        if not (latest / f"random_states_{rank}.pkl").is_file():
            log.warning("checkpoint %s has no RNG state for rank %d: dropout will differ", latest.name, rank)
        state = checkpoints.read_loop_state(latest, rank)
        global_step, start_epoch, skip_batches = state.global_step, state.epoch, state.batches_in_epoch
        samples_seen = state.samples_seen
        complete_steps.append(global_step)
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
        started = time.perf_counter()
        target = checkpoints.step_dir(args.checkpoint_dir, global_step)
        log.info("writing checkpoint %s", target.name)
        checkpoints.begin(target, rank)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(target), safe_serialization=True)
        state = checkpoints.LoopState(global_step, epoch, batches_in_epoch, samples_seen)
        checkpoints.write_rank_manifest(target, rank, state)
        accelerator.wait_for_everyone()
        complete_steps.append(global_step)
        if accelerator.is_local_main_process:
            checkpoints.prune(args.checkpoint_dir, complete_steps, args.keep_checkpoints)
        accelerator.wait_for_everyone()
        log.info("checkpoint saved: step %d in %.1f s", global_step, time.perf_counter() - started)

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
    timer = CheckpointTimer(args.checkpoint_minutes)
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
            # Ordinary steps never wait for the device: the ranks compare notes every --control_steps only.
            stop_now = timed_due = False
            if args.control_steps > 0 and global_step % args.control_steps == 0:
                stop_now, timed_due = any_rank(accelerator, [stop.requested, timer.due()])
            step_due = args.checkpoint_steps > 0 and global_step % args.checkpoint_steps == 0
            if stop_now or timed_due or step_due:
                # A checkpoint at the end of an epoch resumes at the start of the next one.
                at_end = batches_in_epoch >= batches_per_epoch
                save_checkpoint(epoch + 1 if at_end else epoch, 0 if at_end else batches_in_epoch)
                timer.restart()
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
        inference.copy_into(args.output_dir)  # the endpoint's entry point travels inside model.tar.gz
        summary = {"global_step": global_step, "samples_seen": samples_seen, "processes": world}
        (args.output_dir / "training_summary.json").write_text(json.dumps(summary, indent=2))
        log.info("model saved to %s", args.output_dir)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
