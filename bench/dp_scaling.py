"""Data-parallel scaling on CPU: 1 process vs 2 processes (torchrun, gloo, 1 thread each), same
per-process batch, over the same features (two epochs, the second timed; 2 processes take half the steps
per epoch). Efficiency = throughput(2) / (2 x throughput(1)).

    python -m bench.dp_scaling [--pairs 3] [--epoch-steps 40]

Also printed: the ceiling that padding alone sets. One process pads each batch to its longest feature; two
processes each take one batch per step and the step lasts as long as the longer one. The ratio of padded
tokens (1 process) to twice the per-step maximum (2 processes), for the timed epoch's order, bounds the
efficiency before any communication; it rises towards 1 as mega-batches grow with the dataset.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

from bench.common import (
    alternate,
    median,
    run_train_py,
    save,
    squad_like_lengths,
    table,
    training_parser,
    write_features,
)
from config.paths import bundled_model_dir
from local_runner.demo_models import build_tiny_model


def run(model: Path, features: Path, processes: int, epoch_steps: int, batch: int) -> dict[str, float]:
    hyperparameters = ["--per_device_train_batch_size", str(batch)]
    return run_train_py(
        model, features, processes, epoch_steps // processes, hyperparameters, env={"OMP_NUM_THREADS": "1"}
    )


def padding_ceiling(lengths: list[int], batch: int, seed: int = 42, epoch: int = 1) -> float:
    """Efficiency bound from padding alone (see the module docstring), with train.py's sampler."""
    from qa.batching import LengthGroupedSampler

    def order(processes: int) -> list[int]:
        sampler = LengthGroupedSampler(lengths, group_size=batch * processes, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    def padded(indices: list[int]) -> int:
        return max(lengths[i] for i in indices) * len(indices)

    one, two = order(1), order(2)
    single = sum(padded(one[i : i + batch]) for i in range(0, len(one), batch))
    step = 2 * batch
    paired = sum(max(padded(two[i : i + batch]), padded(two[i + batch : i + step])) for i in range(0, len(two), step))
    return single / (2 * paired)


def main() -> None:
    parser = training_parser(__doc__)
    parser.add_argument("--model", choices=("tiny", "minilm"), default="minilm")
    # 320 features: one and two processes get mega-batches of the same size (80)
    parser.set_defaults(epoch_steps=40)
    args = parser.parse_args()
    if args.epoch_steps % 2:
        parser.error("--epoch-steps must be even: 2 processes take half the steps of an epoch")
    minilm = bundled_model_dir()
    scratch = Path(tempfile.mkdtemp())
    model = minilm if args.model == "minilm" else build_tiny_model(scratch / "tiny", hidden_size=64)
    features = write_features(scratch / "features", minilm, count=args.epoch_steps * args.batch)
    results = alternate({p: partial(run, model, features, p, args.epoch_steps, args.batch) for p in (1, 2)}, args.pairs)
    one, two = (median(results[p], "samples_per_second") for p in (1, 2))
    efficiency = two / (2 * one)
    ceiling = padding_ceiling(squad_like_lengths(args.epoch_steps * args.batch), args.batch)
    print(
        table(
            [["1", f"{one:.1f}", "", ""], ["2", f"{two:.1f}", f"{efficiency:.2f}", f"{ceiling:.2f}"]],
            ["processes", "samples/s (median)", "scaling efficiency", "padding ceiling"],
        )
    )
    payload = {"args": vars(args), "results": results, "efficiency": efficiency, "padding_ceiling": ceiling}
    print(f"saved {save('dp_scaling', payload)}")


if __name__ == "__main__":
    main()
