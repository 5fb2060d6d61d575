"""Shared benchmark helpers: synthetic SQuAD-shaped features, alternating runs, result tables."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from qa.outputs import (
    CHECKPOINT_SAVED,
    LOCAL_CHECKPOINT_DIR_ENV,
    LOG_LOSS,
    LOG_SAMPLES_PER_SECOND,
    MODEL_CHANNEL,
    MODEL_DIR_ENV,
    TRAIN_CHANNEL,
    TRAINING_STEP,
    channel_env,
)

from config.paths import BENCH_RESULTS, PROJECT_ROOT, TRAINING_CODE
from local_runner.launch import launcher

ROOT = PROJECT_ROOT
RESULTS = BENCH_RESULTS
K = TypeVar("K")  # what names a configuration in alternate()


def squad_like_lengths(count: int, seed: int = 0, max_len: int = 384) -> list[int]:
    """Feature lengths shaped like SQuAD v1.1 at max_seq_length 384 / stride 128: a broad body around
    150-200 tokens and a spike of long contexts cut at the window size."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.lognormal(mean=5.1, sigma=0.35, size=count)
    lengths = np.where(rng.random(count) < 0.12, max_len, lengths)
    return [int(x) for x in np.clip(lengths, 48, max_len)]


def write_features(
    directory: Path, tokenizer_dir: Path, count: int, seed: int = 0, fixed_length: int | None = None
) -> Path:
    """Training feature files (qa.feature_files) of random token ids with SQuAD-like lengths (or all
    `fixed_length` long) and valid answer positions."""
    import numpy as np
    from qa import feature_files
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {k: [] for k in ("input_ids", "token_type_ids", "attention_mask")}
    rows.update(start_positions=[], end_positions=[], example_id=[])
    lengths = [fixed_length] * count if fixed_length else squad_like_lengths(count, seed)
    for i, length in enumerate(lengths):
        question = int(rng.integers(8, 20))
        body = rng.integers(1000, tokenizer.vocab_size, size=length - 3).tolist()
        ids = [
            tokenizer.cls_token_id,
            *body[:question],
            tokenizer.sep_token_id,
            *body[question:],
            tokenizer.sep_token_id,
        ]
        types = [0] * (question + 2) + [1] * (length - question - 2)
        start = int(rng.integers(question + 2, length - 2))
        rows["input_ids"].append(ids)
        rows["token_type_ids"].append(types)
        rows["attention_mask"].append([1] * length)
        rows["start_positions"].append(start)
        rows["end_positions"].append(min(start + int(rng.integers(0, 5)), length - 2))
        rows["example_id"].append(f"e{i}")
    feature_files.write_features(directory, rows)
    return directory


def training_parser(description: str | None) -> argparse.ArgumentParser:
    """The options every training benchmark takes.

    Each run trains two epochs over the same features and is timed on the second: every configuration then
    processes exactly the same features (a window of steps would compare different samplers' picks), and
    the first epoch pays for start-up, allocation and the first-iteration costs.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=3, help="rounds of alternating runs")
    parser.add_argument("--epoch-steps", type=int, default=20, help="optimizer steps per epoch (1 process)")
    parser.add_argument("--batch", type=int, default=8, help="per-process batch size")
    return parser


def machine() -> dict[str, Any]:
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def alternate(runs: Mapping[K, Callable[[], dict[str, float]]], pairs: int) -> dict[K, list[dict[str, float]]]:
    """Run each configuration once per round, in the same order, `pairs` rounds (A B A B ...)."""
    results: dict[K, list[dict[str, float]]] = {name: [] for name in runs}
    for round_index in range(pairs):
        for name, run in runs.items():
            outcome = run()
            print(f"  round {round_index + 1} {name}: {json.dumps(outcome)}", flush=True)
            results[name].append(outcome)
    return results


def median(values: list[dict[str, float]], key: str) -> float:
    return statistics.median(v[key] for v in values)


def run_command(command: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[str, float]:
    """Run `command` to its end; its stdout and the seconds it took. A failure raises with its output."""
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{command} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result.stdout, elapsed


def run_python(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[str, float]:
    """This interpreter with `args`, as run_command runs it."""
    return run_command([sys.executable, *args], env, cwd)


def run_train_py(
    model: Path,
    features: Path,
    processes: int,
    epoch_steps: int,
    hyperparameters: list[str],
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    """training_code/train.py the SageMaker way (torchrun for more than one process) for two epochs of
    `epoch_steps` optimizer steps; samples/s and mean loss of the second epoch (one logging interval), and the
    seconds of each checkpoint it saved."""
    schedule = ["--max_steps", str(2 * epoch_steps), "--logging_steps", str(epoch_steps)]
    with tempfile.TemporaryDirectory() as scratch:
        out, _ = run_command(
            [
                *launcher(processes),
                "train.py",
                "--checkpoint_steps",
                "0",
                "--checkpoint_minutes",
                "0",
                *schedule,
                *hyperparameters,
            ],
            env={
                channel_env(MODEL_CHANNEL): str(model),
                channel_env(TRAIN_CHANNEL): str(features),
                MODEL_DIR_ENV: f"{scratch}/model",
                LOCAL_CHECKPOINT_DIR_ENV: f"{scratch}/checkpoints",
                **(env or {}),
            },
            cwd=TRAINING_CODE,
        )
    lines = [dict(p.split("=") for p in line.split()) for line in out.splitlines() if re.match(TRAINING_STEP, line)]
    if len(lines) != 2:
        raise RuntimeError(f"expected one metrics line per epoch, got:\n{out[-2000:]}")
    second_epoch = lines[1]
    saves = [float(seconds) for seconds in re.findall(CHECKPOINT_SAVED, out)]
    return {
        "samples_per_second": float(second_epoch[LOG_SAMPLES_PER_SECOND]),
        "final_loss": float(second_epoch[LOG_LOSS]),
        **({"checkpoint_seconds": max(saves)} if saves else {}),
    }


def save(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": time.strftime("%Y-%m-%d"), "machine": machine(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def table(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
