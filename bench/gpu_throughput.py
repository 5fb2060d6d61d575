"""BERT-large (whole word masking config, random weights) QA fine-tuning steps on one GPU.

    python -m bench.gpu_throughput --peak-tflops 989 [--batch 32] [--steps 30] [--compile]
    python -m bench.gpu_throughput --peak-tflops 989 --loop [--batch 16] [--steps 30]
    python -m bench.gpu_throughput --peak-tflops 989 --compare [--steps 30] [--compile]

--compare (issue 31): the old batching against the new on SQuAD-like feature lengths (bench/common.py), with a
reference step of the same shape in the same run: old = batch 8, length-grouped, padded to a multiple of 8,
2-D attention mask, eager; new = the auto batch of this GPU (qa/memory.py), exact-length batches padded only to
their longest, no mask on unpadded batches, torch.compile when --compile is passed (the pipeline's "auto"
resolves to off for the reference workload: config/costs.py compile_hyperparameter); reference = the bare model
at the new batch on full 384-token windows with an all-ones mask. MFU counts the real (unpadded) tokens' FLOPs.

The model alone: bf16 autocast, SDPA attention, fused AdamW, sequence length 384, random tokens already on
the GPU. With --loop, the real training loop instead: training_code/train.py (Accelerate, collator, DataLoader
workers, scheduler, clipping, logging, one checkpoint at the end) on synthetic features all 384 tokens long,
two epochs of --steps, the second timed; the ratio of the two runs' samples/s is what the loop costs.
Prints samples/s, tokens/s and model FLOPs utilisation (MFU) against the peak dense bf16 FLOP/s you pass
(989 for H100/H200 SXM, 312 for A100) and writes them to bench/results/gpu_throughput[_loop].json. The model is
built from its config (nothing is downloaded); the loop uses the bundled MiniLM package's BERT uncased
vocabulary. Each mode finishes in a minute or two on an H100-class GPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import run_train_py, save, table, write_features
from config.paths import GPU_THROUGHPUT_RESULT


def bert_large_config(**overrides: Any):
    """bert-large-uncased-whole-word-masking: 24 layers, hidden 1024, 16 heads, intermediate 4096."""
    from transformers import BertConfig

    shape = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
    return BertConfig(**{**shape, **overrides}, attn_implementation="sdpa")


def matmul_parameters(model) -> int:
    """Parameters that take part in matrix multiplies: all but the embedding tables, which are lookups."""
    import torch

    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)


def training_flops_per_token(config, seq_len: int, parameters: int) -> float:
    """6 x matmul parameters (forward + backward) + attention scores and values (12 x layers x hidden x seq)."""
    return 6 * parameters + 12 * config.num_hidden_layers * config.hidden_size * seq_len


def measure(config, batch: int, seq_len: int, steps: int, warmup: int, device: str, use_compile: bool) -> dict:
    """Time `steps` optimizer steps (after `warmup`) of QA fine-tuning on random tokens; throughput and FLOP/s."""
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    inputs = {
        "input_ids": torch.randint(1000, config.vocab_size, (batch, seq_len), device=device, generator=generator),
        "token_type_ids": torch.zeros(batch, seq_len, dtype=torch.long, device=device),
        "attention_mask": torch.ones(batch, seq_len, dtype=torch.long, device=device),
        "start_positions": torch.randint(0, seq_len, (batch,), device=device, generator=generator),
        "end_positions": torch.randint(0, seq_len, (batch,), device=device, generator=generator),
    }
    return measure_batches(config, [(inputs, [seq_len] * batch)], steps, warmup, device, use_compile)


def measure_batches(
    config, batches: list[tuple[dict, list[int]]], steps: int, warmup: int, device: str, use_compile: bool
) -> dict:
    """Time `steps` optimizer steps (after `warmup`) cycling through `batches` (model inputs on `device`, and the
    real length of each row); samples/s and the FLOP/s of the real tokens."""
    import torch
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, fused=True)
    forward = torch.compile(model, dynamic=True) if use_compile else model
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step(inputs: dict) -> torch.Tensor:
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            loss = forward(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    for i in range(warmup):
        step(batches[i % len(batches)][0])
    synchronize()
    samples = flops = 0.0
    in_matmuls = matmul_parameters(model)
    tokens = 0
    started = time.perf_counter()
    for i in range(steps):
        inputs, lengths = batches[(warmup + i) % len(batches)]
        loss = step(inputs)
        samples += len(lengths)
        tokens += sum(lengths)
        flops += sum(n * training_flops_per_token(config, n, in_matmuls) for n in lengths)
    synchronize()
    elapsed = time.perf_counter() - started
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "matmul_parameters": in_matmuls,
        "samples_per_second": samples / elapsed,
        "tokens_per_second": tokens / elapsed,
        "achieved_tflops": flops / elapsed / 1e12,
        "final_loss": float(loss),
    }


def squad_batches(
    config, lengths: list[int], batch: int, old: bool, device: str, count: int
) -> list[tuple[dict, list[int]]]:
    """`count` batches of one epoch's order over `lengths`, collated as train.py did before issue 31 (`old`:
    sorted mega-batches, padded to a multiple of 8, 2-D mask) or does now (exact-length, mask dropped)."""
    import torch
    from qa.batching import DynamicPaddingCollator, LengthGroupedSampler

    sampler = LengthGroupedSampler(lengths, batch * 8, seed=42, batch_size=None if old else batch)
    collate = DynamicPaddingCollator(0, pad_to_multiple_of=8 if old else None, drop_full_mask=not old)
    order = list(sampler)
    generator = torch.Generator().manual_seed(0)
    batches = []
    for start in range(0, min(len(order), count * batch), batch):
        rows = [lengths[i] for i in order[start : start + batch]]
        features = [
            {
                "input_ids": torch.randint(1000, config.vocab_size, (n,), generator=generator).tolist(),
                "token_type_ids": [0] * n,
                "attention_mask": [1] * n,
                "start_positions": n // 3,
                "end_positions": n // 2,
            }
            for n in rows
        ]
        batches.append(({k: v.to(device) for k, v in collate(features).items()}, rows))
    return batches


def compare(
    config, lengths: list[int], new_batch: int, steps: int, warmup: int, device: str, use_compile: bool
) -> dict:
    """Old and new batching on the same lengths, and the bare reference step at the new batch, in one run."""
    count = steps + warmup
    old = measure_batches(config, squad_batches(config, lengths, 8, True, device, count), steps, warmup, device, False)
    new_batches = squad_batches(config, lengths, new_batch, False, device, count)
    new = measure_batches(config, new_batches, steps, warmup, device, use_compile)
    reference = measure(config, new_batch, 384 if max(lengths) >= 384 else max(lengths), steps, warmup, device, False)
    return {
        "old": old,
        "new": new,
        "reference": reference,
        "new_batch": new_batch,
        "mask_free_share_new": sum("attention_mask" not in b for b, _ in new_batches) / len(new_batches),
        "speedup_samples": new["samples_per_second"] / old["samples_per_second"],
    }


def measure_loop(config, tokenizer_dir: Path, batch: int, seq_len: int, steps: int, work: Path) -> dict:
    """train.py on this machine's default device, one process: BERT weights from `config` and the tokenizer in
    `tokenizer_dir` saved to `work`, `steps * batch` synthetic features of length `seq_len`. Two epochs of
    `steps` optimizer steps, the second timed; one checkpoint at the last step (its save time is reported)."""
    from transformers import AutoTokenizer, BertForQuestionAnswering

    model_dir = work / "model"
    BertForQuestionAnswering(config).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(model_dir)
    features = write_features(work / "features", tokenizer_dir, steps * batch, fixed_length=seq_len)
    hyperparameters = ["--per_device_train_batch_size", str(batch), "--group_by_length", "false"]
    result = run_train_py(model_dir, features, 1, steps, [*hyperparameters, "--checkpoint_steps", str(2 * steps)])
    tokens_per_second = result["samples_per_second"] * seq_len
    in_matmuls = matmul_parameters(BertForQuestionAnswering(config))
    return {
        **result,
        "matmul_parameters": in_matmuls,
        "tokens_per_second": tokens_per_second,
        "achieved_tflops": tokens_per_second * training_flops_per_token(config, seq_len, in_matmuls) / 1e12,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peak-tflops", type=float, required=True, help="the GPU's peak dense bf16 TFLOP/s")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=384)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--loop", action="store_true", help="time training_code/train.py instead of the bare model")
    parser.add_argument("--compare", action="store_true", help="old vs new batching against a reference step")
    parser.add_argument("--tokenizer-dir", type=Path, help="a BERT uncased tokenizer for --loop (default: bundled)")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device (this benchmark measures one GPU)")
    torch.backends.cuda.matmul.allow_tf32 = True
    if args.compare:
        compare_main(args)
        return
    if args.loop:
        from config.paths import bundled_model_dir

        tokenizer_dir = args.tokenizer_dir or bundled_model_dir()
        with tempfile.TemporaryDirectory() as work:
            result = measure_loop(bert_large_config(), tokenizer_dir, args.batch, args.seq_len, args.steps, Path(work))
    else:
        result = measure(bert_large_config(), args.batch, args.seq_len, args.steps, args.warmup, "cuda", args.compile)
        result["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    result["mfu"] = result["achieved_tflops"] / args.peak_tflops
    rows = [
        [
            torch.cuda.get_device_name(),
            "train.py" if args.loop else "model only",
            args.batch,
            "yes" if args.compile else "no",
            f"{result['samples_per_second']:.1f}",
            f"{result['tokens_per_second']:,.0f}",
            f"{result['achieved_tflops']:.1f}",
            f"{result['mfu']:.1%}",
            f"{result.get('checkpoint_seconds', float('nan')):.1f}",
        ]
    ]
    header = ["GPU", "what", "batch", "compile", "samples/s", "tokens/s", "TFLOP/s", "MFU", "checkpoint s"]
    print(table(rows, header))
    payload = {"args": vars(args), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, **result}
    print(f"saved {save(f'{GPU_THROUGHPUT_RESULT.stem}_loop' if args.loop else GPU_THROUGHPUT_RESULT.stem, payload)}")


def compare_main(args: argparse.Namespace) -> None:
    """--compare: the table of old, new and reference, each with its MFU; the new/old ratio."""
    import torch
    from qa.cost import BERT_LARGE, ModelShape
    from qa.memory import GIB, per_device_batch
    from qa.recipe import RECIPE_PER_DEVICE_BATCH

    from bench.common import squad_like_lengths

    memory_gb = torch.cuda.get_device_properties(0).total_memory / GIB
    new_batch = per_device_batch(ModelShape.from_config(BERT_LARGE), memory_gb, args.seq_len, RECIPE_PER_DEVICE_BATCH)
    lengths = squad_like_lengths(20_000, max_len=args.seq_len)
    result = compare(bert_large_config(), lengths, new_batch, args.steps, args.warmup, "cuda", args.compile)
    for name in ("old", "new", "reference"):
        result[name]["mfu"] = result[name]["achieved_tflops"] / args.peak_tflops
    labels = {
        "old": ("old: 8, pad to 8, 2-D mask", 8),
        "new": ("new: auto, exact length, no mask", new_batch),
        "reference": ("reference: 384 tokens, ones mask", new_batch),
    }
    rows = []
    for key, (label, batch) in labels.items():
        measured = result[key]
        rate, tflops, mfu = measured["samples_per_second"], measured["achieved_tflops"], measured["mfu"]
        rows.append([label, batch, f"{rate:.1f}", f"{tflops:.1f}", f"{mfu:.1%}"])
    print(table(rows, ["what", "batch", "samples/s", "TFLOP/s", "MFU"]))
    share = result["mask_free_share_new"]
    print(f"new / old samples/s: {result['speedup_samples']:.2f}x; new batches without a mask: {share:.0%}")
    payload = {"args": vars(args), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, **result}
    print(f"saved {save(f'{GPU_THROUGHPUT_RESULT.stem}_compare', payload)}")


if __name__ == "__main__":
    main()
