"""What data parallelism's communication alone costs on CPU, with padding out of the picture.

    python -m bench.ddp_overhead [--pairs 6] [--steps 15] [--length 200]

Two processes (torchrun, gloo, 1 thread each) take training steps on a batch of one fixed shape
(all-MiniLM-L6-v2, batch 8 x `--length` tokens, fused AdamW, gradient clipping as in train.py), alternating:
  - replicas: each process trains its own copy, no gradient exchange (what the two cores give two runs);
  - DDP: the same, with the gradients all-reduced every step, overlapped with the backward pass.
retained = time per step (replicas) / time per step (DDP): the share of the throughput that the
all-reduce leaves. dp_scaling's efficiency also pays for batches of uneven length.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

from bench.common import alternate, median, run_command, save, table
from local_runner.launch import launcher

MODES = ("replicas", "DDP")


def worker(mode: str, length: int, steps: int) -> None:
    """One torchrun process: warm up, then time `steps` training steps between two barriers."""
    import torch
    import torch.distributed as dist
    from qa.optimizer import build_optimizer
    from transformers import AutoModelForQuestionAnswering
    from transformers.utils import logging

    from config.paths import bundled_model_dir

    logging.set_verbosity_error()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = AutoModelForQuestionAnswering.from_pretrained(str(bundled_model_dir())).train()
    if mode == "DDP":
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = build_optimizer(model, learning_rate=3e-5, weight_decay=0.01)
    generator = torch.Generator().manual_seed(rank)
    input_ids = torch.randint(1000, 20000, (8, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    positions = torch.randint(0, length, (8,), generator=generator)

    def step() -> None:
        loss = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            start_positions=positions,
            end_positions=positions,
        ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    if rank == 0:
        print(json.dumps({"seconds_per_step": (time.perf_counter() - started) / steps}))
    dist.destroy_process_group()


def run(mode: str, length: int, steps: int) -> dict[str, float]:
    worker_args = ["--worker", mode, "--length", str(length), "--steps", str(steps)]
    out, _ = run_command([*launcher(2), "-m", "bench.ddp_overhead", *worker_args], env={"OMP_NUM_THREADS": "1"})
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6, help="rounds of alternating runs")
    parser.add_argument("--steps", type=int, default=15, help="timed steps per run (after 3 warm-up steps)")
    parser.add_argument("--length", type=int, default=200, help="tokens per feature (SQuAD's median is ~165)")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.length, args.steps)
        return
    results = alternate({mode: partial(run, mode, args.length, args.steps) for mode in MODES}, args.pairs)
    seconds = {mode: median(results[mode], "seconds_per_step") for mode in MODES}
    retained = seconds["replicas"] / seconds["DDP"]
    rows = [[mode, f"{seconds[mode]:.3f}", f"{retained:.2f}" if mode == "DDP" else ""] for mode in MODES]
    print(table(rows, ["2 processes", "seconds/step (median)", "retained"]))
    print(f"saved {save('ddp_overhead', {'args': vars(args), 'results': results, 'retained': retained})}")


if __name__ == "__main__":
    main()
