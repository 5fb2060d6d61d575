"""Data-parallel scaling on CPU: 1 process vs 2 processes (torchrun, gloo, 1 thread each), same
per-process batch, over the same features (two epochs, the second timed; 2 processes take half the steps
per epoch). Efficiency = throughput(2) / (2 x throughput(1)).

    python -m bench.dp_scaling [--pairs 3] [--epoch-steps 20]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.common import alternate, median, run_train_py, save, table, training_parser, write_features
from pipeline_steps.local.models import build_tiny_model, bundled_model_dir


def run(model: Path, features: Path, processes: int, epoch_steps: int, batch: int) -> dict[str, float]:
    launcher = [] if processes == 1 else ["-m", "torch.distributed.run", f"--nproc_per_node={processes}"]
    launcher += [] if processes == 1 else ["--master_addr=127.0.0.1", "--master_port=29611"]
    hyperparameters = ["--per_device_train_batch_size", str(batch)]
    return run_train_py(
        model, features, launcher, epoch_steps // processes, hyperparameters, env={"OMP_NUM_THREADS": "1"}
    )


def main() -> None:
    parser = training_parser(__doc__)
    parser.add_argument("--model", choices=("tiny", "minilm"), default="minilm")
    args = parser.parse_args()
    if args.epoch_steps % 2:
        parser.error("--epoch-steps must be even: 2 processes take half the steps of an epoch")
    minilm = bundled_model_dir()
    scratch = Path(tempfile.mkdtemp())
    model = minilm if args.model == "minilm" else build_tiny_model(scratch / "tiny", hidden_size=64)
    features = write_features(scratch / "features", minilm, count=args.epoch_steps * args.batch)
    results = alternate(
        {p: (lambda p=p: run(model, features, p, args.epoch_steps, args.batch)) for p in (1, 2)}, args.pairs
    )
    one, two = (median(results[p], "samples_per_second") for p in (1, 2))
    efficiency = two / (2 * one)
    print(
        table(
            [["1", f"{one:.1f}", ""], ["2", f"{two:.1f}", f"{efficiency:.2f}"]],
            ["processes", "samples/s (median)", "scaling efficiency"],
        )
    )
    print(f"saved {save('dp_scaling', {'args': vars(args), 'results': results, 'efficiency': efficiency})}")


if __name__ == "__main__":
    main()
