"""BERT-large (whole word masking config, random weights) QA fine-tuning steps on one GPU.

    python bench/gpu_throughput.py --peak-tflops 989 [--batch 32] [--steps 30] [--compile]

bf16 autocast, SDPA attention, fused AdamW, sequence length 384. Prints samples/s, tokens/s and model FLOPs
utilisation (MFU) against the peak bf16 FLOP/s you pass (e.g. 989 for H100/H200 SXM dense, 312 for A100).
Needs only torch + transformers (no download: the model is built from its config). Finishes in a few minutes.
"""

from __future__ import annotations

import argparse
import json
import time


def training_flops_per_token(config, seq_len: int, parameters: int) -> float:
    """6 x parameters (forward + backward matmuls) + attention scores and values (12 x layers x hidden x seq)."""
    return 6 * parameters + 12 * config.num_hidden_layers * config.hidden_size * seq_len


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peak-tflops", type=float, required=True, help="the GPU's peak dense bf16 TFLOP/s")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=384)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()

    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = True
    # bert-large-uncased-whole-word-masking: 24 layers, hidden 1024, 16 heads, intermediate 4096.
    config = BertConfig(
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        attn_implementation="sdpa",
    )
    model = BertForQuestionAnswering(config).cuda().train()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, fused=True)
    step_fn = torch.compile(model) if args.compile else model
    generator = torch.Generator(device="cuda").manual_seed(0)
    batch = {
        "input_ids": torch.randint(
            1000, config.vocab_size, (args.batch, args.seq_len), device="cuda", generator=generator
        ),
        "token_type_ids": torch.zeros(args.batch, args.seq_len, dtype=torch.long, device="cuda"),
        "attention_mask": torch.ones(args.batch, args.seq_len, dtype=torch.long, device="cuda"),
        "start_positions": torch.randint(0, args.seq_len, (args.batch,), device="cuda", generator=generator),
        "end_positions": torch.randint(0, args.seq_len, (args.batch,), device="cuda", generator=generator),
    }

    def step() -> float:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    samples_per_second = args.steps * args.batch / elapsed
    tokens_per_second = samples_per_second * args.seq_len
    achieved = tokens_per_second * training_flops_per_token(config, args.seq_len, parameters)
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "parameters": parameters,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "compile": args.compile,
        "samples_per_second": round(samples_per_second, 1),
        "tokens_per_second": round(tokens_per_second),
        "achieved_tflops": round(achieved / 1e12, 1),
        "mfu": round(achieved / (args.peak_tflops * 1e12), 3),
        "max_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
        "final_loss": float(loss),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
