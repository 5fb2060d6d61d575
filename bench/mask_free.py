"""Share of training batches that need no attention mask, before and after issue 31's batching (CPU only).

    python -m bench.mask_free

A batch needs no mask when every feature in it is as long as the batch is wide; SDPA's flash kernel takes no
mask, so only such batches can use it. Before: the length-grouped sampler (sorted mega-batches), per-device
batch 8, padded to a multiple of 8 on GPUs. After: exact-length grouping (qa.batching.LengthGroupedSampler
with `batch_size`), padded only to each batch's longest feature, at the auto batch of 1 x p4d (32) and at 8.
Both shard over 8 GPUs (group size = batch x 8), one epoch, seed 42. Three length distributions: the sample
dataset's real features (tokenized with the bundled tokenizer, as tools/estimate.py does), config/costs.py
`squad_lengths` (two lengths only: 384-token windows and the rest at the one length that gives the ~200 mean,
so an upper bound), and bench/common.py `squad_like_lengths` (a broad lognormal body and a spike at 384).
Writes bench/results/mask_free.json.
"""

from __future__ import annotations

from qa.batching import LengthGroupedSampler

from bench.common import save, squad_like_lengths, table
from config.costs import SQUAD_TRAIN_EXAMPLES, SQUAD_TRAIN_FEATURES, squad_lengths
from config.paths import SAMPLE_DATASET

GPUS = 8


def mask_free_share(lengths: list[int], batch: int, multiple: int, exact: bool, seed: int = 42) -> float:
    """Share of one epoch's batches whose padded width equals every feature's length."""
    sampler = LengthGroupedSampler(lengths, batch * GPUS, seed, batch_size=batch if exact else None)
    order = list(sampler)
    batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    free = 0
    for indices in batches:
        widths = [lengths[i] for i in indices]
        padded = -(-max(widths) // multiple) * multiple
        free += all(width == padded for width in widths)
    return free / len(batches)


def distributions() -> dict[str, list[int]]:
    from tools.estimate import dataset_lengths

    sample, *_ = dataset_lengths(SAMPLE_DATASET, 384, 128)
    squad = squad_lengths(SQUAD_TRAIN_FEATURES, SQUAD_TRAIN_EXAMPLES, 384, padded=False)
    return {
        "sample dataset (real)": [n for n, c in sorted(sample.items()) for _ in range(c)],
        "costs.squad_lengths (2 lengths)": [n for n, c in sorted(squad.items()) for _ in range(c)],
        "common.squad_like_lengths (broad)": squad_like_lengths(88_729),
    }


def main() -> None:
    rows, results = [], {}
    for name, lengths in distributions().items():
        before = mask_free_share(lengths, 8, 8, exact=False)
        unrounded = mask_free_share(lengths, 8, 1, exact=False)  # the sorted sampler without the multiple of 8
        after = {batch: mask_free_share(lengths, batch, 1, exact=True) for batch in (32, 8)}
        results[name] = {
            "features": len(lengths),
            "before_batch8_pad8": before,
            **{f"after_batch{b}": s for b, s in after.items()},
        }
        ratio = "inf" if before == 0 else f"{after[32] / before:.1f}x"
        shares = [f"{share:.1%}" for share in (before, unrounded, after[32], after[8])]
        rows.append([name, len(lengths), *shares, ratio])
    header = ["lengths", "features", "before (8, pad 8)", "sorted, no pad 8 (8)", "after (32)", "after (8)"]
    print(table(rows, [*header, "after 32 / before"]))
    print(f"saved {save('mask_free', results)}")


if __name__ == "__main__":
    main()
