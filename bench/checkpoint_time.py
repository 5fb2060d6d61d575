"""Seconds to write one training checkpoint the way train.py does (Accelerate's save_state + the rank's
completion marker, fsynced), for BERT-large with its AdamW state.

    python -m bench.checkpoint_time [--repeats 3] [--dir /path/on/the/disk/to/measure]

Runs on CPU or GPU (states are copied to the host either way). The model has random weights and one optimizer
step on a tiny batch, so the optimizer state has its full size. Writes bench/results/checkpoint_time.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, save
from bench.gpu_throughput import bert_large_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=ROOT / ".cache", help="where to write (the disk measured)")
    args = parser.parse_args()

    import torch
    from accelerate import Accelerator
    from qa import checkpoints
    from qa.optimizer import build_optimizer
    from transformers import BertForQuestionAnswering

    accelerator = Accelerator()
    model = BertForQuestionAnswering(bert_large_config())
    optimizer = build_optimizer(model, 3e-5, 0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    ids = torch.randint(1000, 30000, (1, 16), device=accelerator.device)
    model(input_ids=ids, start_positions=ids[:, 0] % 16, end_positions=ids[:, 1] % 16).loss.backward()
    optimizer.step()

    args.dir.mkdir(parents=True, exist_ok=True)
    seconds, sizes = [], 0
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
            target = checkpoints.step_dir(Path(scratch), repeat + 1)
            started = time.perf_counter()
            checkpoints.begin(target, 0)
            accelerator.save_state(str(target), safe_serialization=True)
            checkpoints.write_rank_manifest(target, 0, checkpoints.LoopState(repeat + 1, 0, 0, 0))
            seconds.append(time.perf_counter() - started)
            sizes = sum(p.stat().st_size for p in target.iterdir())
        print(f"  save {repeat + 1}: {seconds[-1]:.1f} s, {sizes / 1e9:.2f} GB", flush=True)
    median = statistics.median(seconds)
    print(f"median {median:.1f} s for {sizes / 1e9:.2f} GB ({sizes / 1e9 / median:.2f} GB/s)")
    payload = {"device": str(accelerator.device), "bytes": sizes, "seconds": seconds, "median_seconds": median}
    print(f"saved {save('checkpoint_time', payload)}")


if __name__ == "__main__":
    main()
