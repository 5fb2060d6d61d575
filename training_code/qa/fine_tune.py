"""The training job in phases, run in order by train.py: build, resume, train, restore_best, evaluate, save.

`TrainingRun` is what `build` prepares for the other phases and never changes; `Progress` is where the loop
stands: restored by `resume`, advanced by `train`, recorded in every checkpoint. Imported only once the
launcher's variables are translated (qa.distributed.prepare_environment): Accelerate reads them.

The task (--task, a training_code/tasks module, with the label names preprocess.py wrote beside the features) gives
the model's head, what each feature's output is and how the validation split is scored. Evaluation during training
(--evaluation_strategy steps|epoch) scores the validation split as the final evaluation does and records its loss
and the task's metrics in the curves. Early stopping and the model kept both follow the validation score of the
task's gate metric (GATE_METRIC), the pipeline's gate without a benchmark; with evaluation.benchmark the gate reads
the operator's benchmark, which is never used to choose the model (choosing on it would make the gate optimistic).
Each new best is saved as a checkpoint at once (kept by pruning), and the loop state records it with the evaluations
since it, so a resumed run keeps both; at the end the best checkpoint's weights become the model.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from accelerate import Accelerator, PartialState
from accelerate.data_loader import DataLoaderShard
from accelerate.scheduler import AcceleratedScheduler
from accelerate.utils import DataLoaderConfiguration, broadcast_object_list, gather_object, set_seed
from safetensors.torch import load_file
from tasks import task as task_module
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase, get_linear_schedule_with_warmup

from qa import checkpoints, recipe, serving_code
from qa.batching import DynamicPaddingCollator, FeatureDataset, LengthGroupedSampler, builds_sdpa_masks, model_outputs
from qa.cli import setup_logging
from qa.cost import ModelShape
from qa.digest import parameter_digest
from qa.distributed import ddp_kwargs, describe_ddp
from qa.evaluation import Evaluation, ValidationSet, length_sorted_batches, score
from qa.features import length_limit_error
from qa.loop_control import CheckpointTimer, Deadline, StopRequest, any_rank, steps_per_epoch
from qa.memory import CPU_PER_DEVICE_BATCH, GIB, batch_fit_error, per_device_batch
from qa.optimizer import build_optimizer
from qa.outputs import (
    BENCHMARK_PREFIX,
    CHECKPOINT_SAVED_LOG,
    CHECKPOINT_WRITING_LOG,
    EVAL_LOG_PREFIX,
    EVALUATION_FILE,
    LOG_EPOCH,
    LOG_EVAL_LOSS,
    LOG_GRAD_NORM,
    LOG_HISTORY_FILE,
    LOG_LEARNING_RATE,
    LOG_LOSS,
    LOG_SAMPLES_PER_SECOND,
    LOG_STEP,
    LOG_TIME,
    TENSORBOARD_RUN,
    TRAIN_LOG_KEYS,
    TRAINING_LINE,
    metric_values,
)
from qa.precision import resolve_precision
from qa.rng_state import capture_rng, restore_rng
from qa.task_file import TaskFile, read_task_file

log = logging.getLogger("qa")  # the job's log, configured by setup_logging
# Why `train` ended: all its steps, early stopping, --stop_after_seconds, or a SIGTERM (after a checkpoint).
FINISHED, EARLY_STOPPED, DEADLINE, INTERRUPTED = "finished", "early stopping", "deadline", "interrupted"
# The line of an evaluation during training (not the evaluation line: the metric definitions read only the final
# one): "evaluation during training: step=<step> loss=<loss> <metric>=<value> ...".
IN_TRAINING_EVALUATION_PREFIX = "evaluation during training"


@dataclass(frozen=True)
class Schedule:
    """How long the run is, in optimizer steps, and how many samples each step takes."""

    global_batch: int  # samples per optimizer step, all processes together
    updates_per_epoch: int
    total_steps: int
    warmup_steps: int

    def epoch_at(self, step: int) -> float:
        """Epochs done after `step` optimizer steps (fractional, 4 decimals)."""
        return round(step / self.updates_per_epoch, 4)


@dataclass(frozen=True)
class TrainingRun:
    """What `build` prepares for the other phases: the same for the whole run."""

    args: argparse.Namespace
    task: ModuleType  # the tasks module of --task
    label_names: tuple[str, ...] | None  # the dataset's (preprocess.py's task file), for the head and the scores
    accelerator: Accelerator
    stop: StopRequest | None  # None with --control_steps 0: SIGTERM is then not caught
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: AcceleratedScheduler
    loader: DataLoaderShard
    sampler: LengthGroupedSampler
    features: int  # training features in the dataset
    validation: ValidationSet | None  # None without a validation channel: no evaluation
    batches_per_epoch: int  # this process's share, after prepare()
    schedule: Schedule
    benchmark: ValidationSet | None = None  # the operator's benchmark (the gate), scored after the validation set

    @property
    def stop_requested(self) -> bool:
        return self.stop is not None and self.stop.requested


@dataclass
class Progress:
    """Where the loop stands: restored by `resume`, advanced by `train`, recorded in every checkpoint."""

    global_step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0  # batches of `epoch` this process has consumed (or, on resume, will skip)
    samples_seen: int = 0
    complete_steps: list[int] = field(default_factory=list)  # checkpoints known complete: resumed and saved
    history: list[dict[str, float]] = field(default_factory=list)  # LOG_HISTORY_FILE entries so far
    resume_rng: dict[str, Any] | None = None  # RNG state to re-apply after the first resumed batch
    best_score: float | None = None  # early stopping: the best validation score of the gate metric so far
    best_step: int | None = None  # and the step of its checkpoint
    evaluations_since_best: int = 0

    def position(self, batches_per_epoch: int) -> checkpoints.LoopState:
        """What a checkpoint taken now records: at the end of an epoch, a resume starts the next one."""
        best = (self.best_score, self.best_step, self.evaluations_since_best)
        if self.batches_in_epoch >= batches_per_epoch:
            return checkpoints.LoopState(self.global_step, self.epoch + 1, 0, self.samples_seen, *best)
        return checkpoints.LoopState(self.global_step, self.epoch, self.batches_in_epoch, self.samples_seen, *best)


@dataclass
class LossInterval:
    """The training loss summed on the device between two log lines, and the last step's gradient norm: read
    (one all-reduce, one host sync) only when logged."""

    total: torch.Tensor
    grad_norm: torch.Tensor | None = None
    batches: int = 0
    started: float = field(default_factory=time.perf_counter)

    def add(self, loss: torch.Tensor, grad_norm: torch.Tensor | None) -> None:
        self.total += loss
        self.batches += 1
        if grad_norm is not None:
            self.grad_norm = grad_norm

    def read_and_restart(self, run: TrainingRun, progress: Progress) -> dict[str, float]:
        """The log-history entry of the interval (TRAIN_LOG_KEYS), then a fresh interval. The clock is read after
        the values are: `.tolist()` waits for the device, so the interval holds its steps' work."""
        accelerator = run.accelerator
        norm = self.grad_norm if self.grad_norm is not None else torch.full_like(self.total, math.nan)
        loss_sum, grad_norm = accelerator.reduce(torch.stack([self.total, norm.float()]), reduction="mean").tolist()
        elapsed = time.perf_counter() - self.started
        samples = self.batches * run.args.per_device_train_batch_size * accelerator.num_processes
        entry = {
            LOG_STEP: progress.global_step,
            LOG_EPOCH: run.schedule.epoch_at(progress.global_step),
            LOG_TIME: time.time(),
            LOG_LOSS: loss_sum / max(1, self.batches),
            LOG_LEARNING_RATE: run.scheduler.get_last_lr()[0],
            LOG_GRAD_NORM: grad_norm,
            LOG_SAMPLES_PER_SECOND: samples / elapsed,
        }
        self.total.zero_()
        self.grad_norm, self.batches, self.started = None, 0, time.perf_counter()
        return entry


def log_training(run: TrainingRun, progress: Progress, entry: dict[str, float]) -> None:
    """Record a logging step: the `step=… loss=…` line the pipeline's metric definitions parse and the
    TensorBoard scalars (main process), and the log history (every process keeps it; the main one saves it)."""
    progress.history.append(entry)
    run.accelerator.log({f"train/{key}": entry[key] for key in (LOG_EPOCH, *TRAIN_LOG_KEYS)}, step=entry[LOG_STEP])
    if run.accelerator.is_main_process:
        print(TRAINING_LINE.format(**entry), flush=True)


def build(args: argparse.Namespace) -> TrainingRun | None:
    """Accelerator, data, model, optimizer and scheduler, prepared by Accelerate; None (after printing why on
    stderr) when the validation channel is unusable or the longest feature does not fit the model."""
    stop = StopRequest() if args.control_steps > 0 else None
    accelerator = start_accelerator(args)
    world = accelerator.num_processes
    set_seed(args.seed)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True

    declared = read_task_file(args.train_dir, args.task)
    if declared.task != args.task:
        print(
            f"error: the train channel's features are for task {declared.task}, this job's --task is {args.task}",
            file=sys.stderr,
            flush=True,
        )
        return None
    task = task_module(args.task)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    dataset = FeatureDataset.load(args.train_dir, task.LABEL_COLUMNS)
    try:
        validation = load_validation(args.validation_dir, accelerator)
        benchmark = ValidationSet.load(args.benchmark_dir) if args.benchmark_dir.is_dir() else None
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return None
    config = AutoConfig.from_pretrained(args.model_name_or_path)
    longest = [(max(dataset.lengths), "the longest training feature")]
    if validation is not None:
        longest.append((validation.longest, "the longest validation feature"))
    if benchmark is not None:
        longest.append((benchmark.longest, "the longest benchmark feature"))
    for length, what in longest:
        too_long = length_limit_error(length, tokenizer, config, what)
        if too_long:
            print(f"error: {too_long}", file=sys.stderr, flush=True)
            return None
    try:
        resolve_auto(args, config.to_dict(), max(dataset.lengths), world, accelerator.device)
    except ValueError as err:  # the model does not fit this GPU
        print(f"error: {err}", file=sys.stderr, flush=True)
        return None
    model = task.load_model(args.model_name_or_path, declared.label_names, log)
    if args.compile is True:
        # dynamic=True: one graph symbolic in batch and sequence length, so exact-length batches of ~300
        # distinct lengths do not each recompile (a guard failure still may; torch logs recompiles).
        model = torch.compile(model, dynamic=True)
    global_batch = args.per_device_train_batch_size * world * args.gradient_accumulation_steps
    loader, sampler = feature_loader(args, dataset, batch_collator(tokenizer, model), global_batch)
    optimizer = build_optimizer(model, args.learning_rate, args.weight_decay)
    # Sizes per process: Accelerate shards the batches across processes.
    updates_per_epoch = steps_per_epoch(math.ceil(len(loader) / world), args.gradient_accumulation_steps)
    total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.epochs * updates_per_epoch)
    schedule = Schedule(global_batch, updates_per_epoch, total_steps, math.ceil(args.warmup_ratio * total_steps))
    # Accelerate steps a prepared scheduler once per process per optimizer step: scale both counts by it.
    scheduler = get_linear_schedule_with_warmup(optimizer, schedule.warmup_steps * world, total_steps * world)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        log.info("ddp: %s", describe_ddp(model))
    return TrainingRun(
        args=args,
        task=task,
        label_names=declared.label_names,
        accelerator=accelerator,
        stop=stop,
        tokenizer=tokenizer,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        loader=loader,
        sampler=sampler,
        features=len(dataset),
        validation=validation,
        batches_per_epoch=len(loader),
        schedule=schedule,
        benchmark=benchmark,
    )


def resolve_auto(args: argparse.Namespace, config: dict[str, Any], longest: int, world: int, device: Any) -> None:
    """Replace the "auto" hyperparameters in `args` with this device's values, and log them: the per-device batch
    from the memory model of this GPU (qa/memory.py) for the longest training feature, capped at the recipe's
    32 (8 on CPU); learning rate and warm-up of the recipe for the resulting global batch (qa/recipe.py; CPU:
    the project's earlier 3e-5 and 0.1); compile off (the pipeline resolves "auto" from the cost estimate), and on GPUs
    only."""
    gpu = device.type == "cuda"
    if args.per_device_train_batch_size == "auto":
        if gpu:
            memory_gb = torch.cuda.get_device_properties(device).total_memory / GIB
            activation_bytes = 4 if args.precision == "no" else 2
            shape = ModelShape.from_config(config)
            args.per_device_train_batch_size = per_device_batch(
                shape, memory_gb, longest, recipe.RECIPE_PER_DEVICE_BATCH, activation_bytes
            )
        else:
            args.per_device_train_batch_size = CPU_PER_DEVICE_BATCH
    elif gpu:  # an explicit batch: refused here when the memory model says it cannot fit this GPU
        memory_gb = torch.cuda.get_device_properties(device).total_memory / GIB
        problem = batch_fit_error(
            ModelShape.from_config(config),
            memory_gb,
            longest,
            args.per_device_train_batch_size,
            4 if args.precision == "no" else 2,
        )
        if problem:
            raise ValueError(f"--per_device_train_batch_size {args.per_device_train_batch_size}: {problem}")
    global_batch = args.per_device_train_batch_size * world * args.gradient_accumulation_steps
    args.learning_rate = recipe.learning_rate(args.learning_rate, global_batch, gpu)
    args.warmup_ratio = recipe.warmup_ratio(args.warmup_ratio, gpu)
    if args.compile is True and not gpu:
        # compile_pays priced the compile time against the GPU's compute minutes; on a CPU (the local runner, the
        # tests) inductor's compile takes longer than the whole run.
        log.info("compile=true is for the GPU the pipeline priced (qa.cost.compile_pays): not on %s", device.type)
    args.compile = args.compile is True and gpu
    log.info(
        "per_device_train_batch_size=%d (global batch %d) learning_rate=%g warmup_ratio=%g compile=%s",
        args.per_device_train_batch_size,
        global_batch,
        args.learning_rate,
        args.warmup_ratio,
        args.compile,
    )


def start_accelerator(args: argparse.Namespace) -> Accelerator:
    """The process group first (its backend decides the DDP settings), then the Accelerator; logs both."""
    cuda = torch.cuda.is_available()
    PartialState(cpu=not cuda)  # initialises the process group
    backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    precision = resolve_precision(args.precision)
    accelerator = Accelerator(
        cpu=not cuda,
        mixed_precision=precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        # non_blocking: host-to-device copies from pinned memory overlap the running step.
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, non_blocking=cuda),
        kwargs_handlers=[ddp_kwargs(backend, precision)],
        # Training curves: TensorBoard event files, written by the main process only (Accelerate's trackers).
        log_with="tensorboard",
        project_dir=str(args.tensorboard_dir),
    )
    accelerator.init_trackers(TENSORBOARD_RUN)
    setup_logging(accelerator.is_main_process)
    if cuda and precision != args.precision:
        log.warning("--precision %s: this GPU has no native bf16, training in %s", args.precision, precision)
    log.info(
        "distributed=%s backend=%s world_size=%d device=%s precision=%s",
        accelerator.distributed_type,
        backend or "none",
        accelerator.num_processes,
        accelerator.device,
        accelerator.mixed_precision,
    )
    return accelerator


def feature_loader(
    args: argparse.Namespace, dataset: FeatureDataset, collator: DynamicPaddingCollator, global_batch: int
) -> tuple[torch.utils.data.DataLoader[Any], LengthGroupedSampler]:
    """The (not yet prepared) loader of dynamically padded batches, and its length-grouped sampler: exact-length
    batches on GPUs (unpadded batches need no mask, so SDPA can take its flash kernel); on CPU, where no such
    kernel exists, the sorted mega-batches as before, which keeps the batches, and so the F1, of CPU runs (the
    demo: F1 88.3 both ways on the sample at its settings; exact-length batches gave 81.0, bench/RESULTS.md
    section 10)."""
    cuda = torch.cuda.is_available()
    sampler = LengthGroupedSampler(
        dataset.lengths,
        group_size=global_batch,
        seed=args.seed,
        shuffle=True,
        batch_size=args.per_device_train_batch_size if cuda else None,
    )
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
    return loader, sampler


def batch_collator(tokenizer: PreTrainedTokenizerBase, model: torch.nn.Module) -> DynamicPaddingCollator:
    """Dynamic padding to each batch's longest feature, no attention mask for a batch without padding (SDPA's
    flash kernel takes none), and otherwise the mask prepared on the host where the model takes one (no host
    sync per forward pass). No rounding up to a multiple of 8: it would pad, and so mask, almost every
    exact-length batch, and no measurement here shows the tensor-core shapes paying for that (issue 31)."""
    return DynamicPaddingCollator.for_tokenizer(tokenizer, sdpa_masks=builds_sdpa_masks(model), drop_full_mask=True)


def load_validation(directory: Path, accelerator: Accelerator) -> ValidationSet | None:
    """The validation channel's features and examples, read before training so that a bad channel fails
    before any GPU time is spent; None (with a warning from the main process) when the job has none."""
    if directory.is_dir():
        return ValidationSet.load(directory)
    if accelerator.is_main_process:
        log.warning(
            "no validation channel at %s: the model will not be evaluated (no %s, no evaluation line for the "
            "pipeline's gate)",
            directory,
            EVALUATION_FILE,
        )
    return None


def resume(accelerator: Accelerator, checkpoint_dir: Path) -> Progress:
    """Load the newest complete checkpoint (model, optimizer, scheduler, RNG states) and return its position in
    the run; a fresh start when there is none."""
    latest = checkpoints.find_latest_complete(checkpoint_dir, accelerator.num_processes)
    if latest is None:
        return Progress()
    rank = accelerator.process_index
    accelerator.load_state(str(latest))
    if not (latest / f"random_states_{rank}.pkl").is_file():
        log.warning("checkpoint %s has no RNG state for rank %d: dropout will differ", latest.name, rank)
    saved = checkpoints.read_loop_state(latest, rank)
    progress = Progress(
        saved.global_step,
        saved.epoch,
        saved.batches_in_epoch,
        saved.samples_seen,
        complete_steps=[saved.global_step],
        history=checkpoints.read_log_history(latest),
        # Creating the resumed iterator draws from the RNG; re-apply the saved state after its first batch.
        resume_rng=capture_rng() if saved.batches_in_epoch else None,
        best_score=saved.best_score,
        best_step=saved.best_step,
        evaluations_since_best=saved.evaluations_since_best,
    )
    if saved.best_step is not None and saved.best_step != saved.global_step:
        progress.complete_steps.insert(0, saved.best_step)  # kept by pruning: the model at the end
    log.info(
        "resumed from %s: step %d, epoch %d, batch %d of the epoch",
        latest.name,
        progress.global_step,
        progress.epoch,
        progress.batches_in_epoch,
    )
    return progress


def train(run: TrainingRun, progress: Progress, deadline: Deadline | None = None) -> str:
    """The epoch loop, from `progress` to the last step, early stopping or `deadline`; returns why it ended
    (FINISHED, EARLY_STOPPED, DEADLINE, or INTERRUPTED when a SIGTERM stopped it after a checkpoint)."""
    schedule = run.schedule
    log.info(
        "training: %d features, %d optimizer steps (%d per epoch), global batch %d, warmup %d",
        run.features,
        schedule.total_steps,
        schedule.updates_per_epoch,
        schedule.global_batch,
        schedule.warmup_steps,
    )
    bar = tqdm(
        total=schedule.total_steps,
        initial=progress.global_step,
        disable=not (run.accelerator.is_main_process and sys.stderr.isatty()),
    )
    run.model.train()
    interval = LossInterval(torch.zeros((), device=run.accelerator.device))
    timer = CheckpointTimer(run.args.checkpoint_minutes)
    deadline = deadline or Deadline(0)
    ended = ""
    while progress.global_step < schedule.total_steps and not ended:
        ended = train_epoch(run, progress, interval, timer, deadline, bar)
        if ended != INTERRUPTED:  # an interrupted epoch resumes from its checkpoint's position
            progress.epoch += 1
            progress.batches_in_epoch = 0
    bar.close()
    if ended in (EARLY_STOPPED, DEADLINE):
        log.warning("training ended by %s at step %d of %d", ended, progress.global_step, schedule.total_steps)
    return ended or FINISHED


def train_epoch(
    run: TrainingRun,
    progress: Progress,
    interval: LossInterval,
    timer: CheckpointTimer,
    deadline: Deadline,
    bar: tqdm,
) -> str:
    """The rest of `progress.epoch`, or up to the last step: "" when it got there, else why it stopped."""
    skip = progress.batches_in_epoch
    epoch_loader = run.accelerator.skip_first_batches(run.loader, skip) if skip else run.loader
    # Accelerate re-seeds the sampler with the loader's own iteration count: keep both at `epoch`.
    epoch_loader.set_epoch(progress.epoch)
    run.sampler.set_epoch(progress.epoch)
    for batch in epoch_loader:
        if progress.resume_rng is not None:
            restore_rng(progress.resume_rng)
            progress.resume_rng = None
        interval.add(*training_step(run, batch))
        progress.batches_in_epoch += 1
        if not run.accelerator.sync_gradients:
            continue
        progress.global_step += 1
        progress.samples_seen += run.schedule.global_batch
        bar.update(1)
        if progress.global_step % run.args.logging_steps == 0 or progress.global_step == run.schedule.total_steps:
            log_training(run, progress, interval.read_and_restart(run, progress))
        stop = evaluation_due(run, progress) and evaluate_in_training(run, progress)
        ended = checkpoint_if_due(run, progress, timer, deadline)
        if ended == INTERRUPTED:
            log.warning("stop requested (SIGTERM): checkpoint at step %d saved, exiting", progress.global_step)
            return ended
        if stop or ended:
            return EARLY_STOPPED if stop else ended
        if progress.global_step >= run.schedule.total_steps:
            break
    return ""


def evaluation_due(run: TrainingRun, progress: Progress) -> bool:
    """After an optimizer step: whether --evaluation_strategy evaluates now (always at the last step)."""
    args = run.args
    if run.validation is None or args.evaluation_strategy == "no":
        return False
    if progress.global_step >= run.schedule.total_steps:
        return True
    if args.evaluation_strategy == "steps":
        return progress.global_step % args.evaluation_steps == 0
    return progress.batches_in_epoch >= run.batches_per_epoch


def evaluate_in_training(run: TrainingRun, progress: Progress) -> bool:
    """Score the validation split now, record it in the curves, and keep a new best score of the task's gate metric
    as a checkpoint (saved now: the model kept at the end). True when early stopping ends training:
    --early_stopping_patience evaluations in a row without a better one."""
    assert run.validation is not None
    step, gate = progress.global_step, run.task.GATE_METRIC
    evaluation = score_on(run, run.validation)
    if evaluation is not None:
        record_evaluation(run, progress, step, evaluation)
        line = f"{IN_TRAINING_EVALUATION_PREFIX}: step={step} loss={evaluation.loss:.4f}"
        print(f"{line} {metric_values(evaluation.metrics)}", flush=True)
    # The main process's score, on every process.
    [best] = broadcast_object_list([evaluation.metrics[gate] if evaluation is not None else None])
    if progress.best_score is None or best > progress.best_score:
        progress.best_score, progress.best_step, progress.evaluations_since_best = best, step, 0
        save_checkpoint(run, progress)
        return False
    progress.evaluations_since_best += 1
    patience = run.args.early_stopping_patience
    log.info(
        "%s %.4f at step %d: no better than %.4f at step %d (%d evaluation(s))",
        gate,
        best,
        step,
        progress.best_score,
        progress.best_step,
        progress.evaluations_since_best,
    )
    return patience > 0 and progress.evaluations_since_best >= patience


def record_evaluation(
    run: TrainingRun, progress: Progress, step: int, evaluation: Evaluation, scalars: bool = True
) -> None:
    """An evaluation of the model at `step` in the curves (main process): the log history and, with `scalars`,
    TensorBoard's eval/* scalars."""
    metrics = {EVAL_LOG_PREFIX + name: value for name, value in evaluation.metrics.items()}
    metrics[LOG_EVAL_LOSS] = evaluation.loss
    if scalars:
        run.accelerator.log({f"eval/{key.removeprefix('eval_')}": value for key, value in metrics.items()}, step=step)
    progress.history.append({LOG_STEP: step, LOG_EPOCH: run.schedule.epoch_at(step), LOG_TIME: time.time(), **metrics})


def restore_best(run: TrainingRun, progress: Progress) -> int:
    """Load the best evaluated checkpoint's weights into the model (every process: the main one reads them and
    broadcasts them); returns the step of the model now held, the last step when no evaluation chose one."""
    best = progress.best_step
    if best is None or best == progress.global_step:
        return progress.global_step
    accelerator = run.accelerator
    if accelerator.is_main_process:
        weights = checkpoints.model_weights(checkpoints.step_dir(run.args.checkpoint_dir, best))
        # save_state writes the unwrapped module's keys; load_state_dict copies the tensors onto the device.
        accelerator.unwrap_model(run.model).load_state_dict(load_file(weights))
    if accelerator.num_processes > 1:
        for tensor in run.model.state_dict().values():
            torch.distributed.broadcast(tensor, src=0)
    log.info(
        "the model saved is the best evaluated: step %d (%s %.4f), not the last, %d",
        best,
        run.task.GATE_METRIC,
        progress.best_score,
        progress.global_step,
    )
    return best


def training_step(run: TrainingRun, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Forward and backward; clipping and the optimizer update when gradients sync. Returns the detached loss
    and, when gradients synced, their total norm before clipping (both still on the device)."""
    accelerator, model, optimizer = run.accelerator, run.model, run.optimizer
    grad_norm = None
    with accelerator.accumulate(model):
        loss: torch.Tensor = model(**batch).loss
        accelerator.backward(loss)
        if accelerator.sync_gradients:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), run.args.max_grad_norm)
        optimizer.step()
        run.scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return loss.detach(), None if grad_norm is None else grad_norm.detach()


def checkpoint_if_due(run: TrainingRun, progress: Progress, timer: CheckpointTimer, deadline: Deadline) -> str:
    """After an optimizer step: save a checkpoint if one is due (steps, epochs, timer, SIGTERM on any rank) and
    not saved at this step already. INTERRUPTED when a SIGTERM asks the run to stop, DEADLINE when the deadline
    passed on any rank (no checkpoint for it: the model is evaluated and saved next), else ""."""
    args, step = run.args, progress.global_step
    # Ordinary steps never wait for the device: the ranks compare notes every --control_steps only.
    stop_now = timed_due = past_deadline = False
    if args.control_steps > 0 and step % args.control_steps == 0:
        stop_now, timed_due, past_deadline = any_rank(
            run.accelerator, [run.stop_requested, timer.due(), deadline.passed()]
        )
    step_due = args.checkpoint_steps > 0 and step % args.checkpoint_steps == 0
    # At the end of every --checkpoint_epochs-th epoch but the last: the model itself is saved right after that.
    epoch_due = (
        args.checkpoint_epochs > 0
        and progress.batches_in_epoch >= run.batches_per_epoch
        and (progress.epoch + 1) % args.checkpoint_epochs == 0
        and step < run.schedule.total_steps
    )
    saved = bool(progress.complete_steps) and progress.complete_steps[-1] == step
    if (stop_now or timed_due or step_due or epoch_due) and not saved:
        save_checkpoint(run, progress)
        timer.restart()
    return INTERRUPTED if stop_now else DEADLINE if past_deadline else ""


def save_checkpoint(run: TrainingRun, progress: Progress) -> None:
    """Every rank writes its files of step-N/ and then its completion marker; then older checkpoints go."""
    accelerator, args = run.accelerator, run.args
    rank = accelerator.process_index
    started = time.perf_counter()
    target = checkpoints.step_dir(args.checkpoint_dir, progress.global_step)
    log.info(CHECKPOINT_WRITING_LOG, target.name)
    checkpoints.begin(target, rank)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(target), safe_serialization=True)
    if rank == 0:  # rank 0's file: listed in its completion marker
        checkpoints.write_log_history(target, progress.history)
    checkpoints.write_rank_manifest(target, rank, progress.position(run.batches_per_epoch))
    accelerator.wait_for_everyone()
    progress.complete_steps.append(progress.global_step)
    if accelerator.is_local_main_process:
        checkpoints.prune(args.checkpoint_dir, progress.complete_steps, args.keep_checkpoints, progress.best_step)
    accelerator.wait_for_everyone()
    log.info(CHECKPOINT_SAVED_LOG, progress.global_step, time.perf_counter() - started)


def save(run: TrainingRun, progress: Progress, model_step: int, ended: str = FINISHED) -> None:
    """The final model (safetensors + config), the tokenizer, the endpoint's code, a summary and the log history
    in --output_dir."""
    accelerator, output_dir = run.accelerator, run.args.output_dir
    # Every rank prints a digest of its parameters: data-parallel replicas must agree bit for bit.
    # One write per line: ranks share stdout, and a single short write is not interleaved.
    digest = parameter_digest(accelerator.unwrap_model(run.model))
    sys.stdout.write(f"rank={accelerator.process_index} parameter_sha256={digest}\n")
    sys.stdout.flush()
    accelerator.wait_for_everyone()
    output_dir.mkdir(parents=True, exist_ok=True)
    accelerator.unwrap_model(run.model).save_pretrained(
        output_dir,
        is_main_process=accelerator.is_main_process,
        save_function=accelerator.save,
        state_dict=accelerator.get_state_dict(run.model),
        safe_serialization=True,
    )
    if accelerator.is_main_process:
        run.tokenizer.save_pretrained(output_dir)
        serving_code.copy_into(output_dir)  # the endpoint's entry point travels inside model.tar.gz
        TaskFile(run.task.NAME, run.label_names).write(output_dir)  # the endpoint's task (inference.py)
        summary = {
            "global_step": progress.global_step,
            "model_step": model_step,  # the best evaluated step's weights (restore_best), else the last step's
            "ended_by": ended,
            "samples_seen": progress.samples_seen,
            "processes": accelerator.num_processes,
        }
        (output_dir / "training_summary.json").write_text(json.dumps(summary, indent=2))
        (output_dir / LOG_HISTORY_FILE).write_text(json.dumps(progress.history, indent=1))
        log.info("model saved to %s", output_dir)


@contextmanager
def served_precision(accelerator: Accelerator, prepared: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """The prepared model's own module in eval mode, computing as the endpoint does (inference.py): float32
    weights without Accelerate's mixed-precision forward, and no TF32 matmuls (PyTorch's default, which the
    endpoint keeps; `build` turns them on for training). Afterwards the module is as training left it.

    `unwrap_model(keep_fp32_wrapper=False)` (Accelerate 1.4.0 and 1.12.0 alike) takes the autocast forward off
    the module itself: it pops `_original_forward` and rebinds `forward`, both set by `prepare`; DDP calls that
    same module, so both go back, or training after an evaluation would run in float32.
    """
    module = accelerator.unwrap_model(prepared)
    autocast_forward = {
        name: module.__dict__[name] for name in ("forward", "_original_forward") if name in module.__dict__
    }
    training, tf32 = module.training, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        plain = accelerator.unwrap_model(prepared, keep_fp32_wrapper=False)
        yield plain.eval()
    finally:
        module.__dict__.update(autocast_forward)
        module.train(training)
        torch.backends.cuda.matmul.allow_tf32 = tf32


def evaluate(run: TrainingRun, progress: Progress, model_step: int) -> Evaluation | None:
    """The task's metrics of the trained model on the validation set in the precision the endpoint serves (see
    served_precision), data-parallel over every process (see qa.evaluation): the main process prints the
    evaluation line once, writes the evaluation report into the model dir and the predictions into the output
    data dir, logs the scores to TensorBoard and the log history, and returns them (None elsewhere). Then the
    operator's benchmark, when the job has one: its line (the pipeline's gate) and TensorBoard scalars. The model
    is the one of `model_step` (restore_best); evaluations during training already put its scalars in the curves."""
    if run.validation is None:
        return None
    accelerator, args, step = run.accelerator, run.args, model_step
    started = time.perf_counter()
    evaluation = score_on(run, run.validation)
    if evaluation is not None:
        evaluation.write(args.output_dir, args.output_data_dir)
        print(evaluation.line(), flush=True)
        record_evaluation(run, progress, step, evaluation, scalars=args.evaluation_strategy == "no")
        log.info(
            "evaluated %d features of %d examples on %d process(es) in %.1f s",
            len(run.validation.features),
            len(run.validation.examples),
            accelerator.num_processes,
            time.perf_counter() - started,
        )
    if run.benchmark is not None:
        graded = score_on(run, run.benchmark)
        if graded is not None:
            print(graded.line(BENCHMARK_PREFIX), flush=True)
            accelerator.log({f"benchmark/{name}": value for name, value in graded.metrics.items()}, step=step)
    accelerator.wait_for_everyone()
    return evaluation


def score_on(run: TrainingRun, validation: ValidationSet) -> Evaluation | None:
    """Every process predicts its share of `validation`'s batches; the main process scores them (None elsewhere)."""
    accelerator, features = run.accelerator, validation.features
    batches = length_sorted_batches(features, run.args.eval_batch_size)
    mine = batches[accelerator.process_index :: accelerator.num_processes]
    with served_precision(accelerator, run.model) as model:
        collator = batch_collator(run.tokenizer, model)
        gathered = gather_object(
            model_outputs(model, collator, features, mine, accelerator.device, run.task.feature_output)
        )
    if not accelerator.is_main_process:
        return None
    outputs = [output for _, output in sorted(gathered, key=lambda pair: pair[0])]
    return score(run.task, validation, outputs, run.label_names)
