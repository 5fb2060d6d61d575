"""ClaimManifest's validation throughput (qa/claim_validation.py, one core): MB/s of JSON Lines and of SQuAD JSON,
the figures behind CLAIM_MAX_DATASET_MB. The data is the bundled sample repeated with unique ids; each format is
timed on its own (the other split is the sample's small file), in CPU seconds of this process.

    python -m bench.claim_validation_throughput [--repeat 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from qa.claim_validation import validate_dataset

from bench.common import alternate, median, save, table
from config.paths import SAMPLE_DATASET

TRAIN, VALIDATION = "train/train.jsonl", "validation/validation.json"


def repeated_sample(directory: Path, repeat: int) -> None:
    """The sample's train (JSON Lines) and validation (SQuAD JSON) files, each `repeat` times, ids made unique."""
    lines = (SAMPLE_DATASET / TRAIN).read_text().splitlines()
    (directory / "train").mkdir(parents=True)
    (directory / "validation").mkdir()
    with (directory / TRAIN).open("w") as handle:
        for copy in range(repeat):
            for line in lines:
                record = json.loads(line)
                handle.write(json.dumps({**record, "id": f"{record['id']}-{copy}"}) + "\n")
    articles = []
    for copy in range(repeat):
        for article in json.loads((SAMPLE_DATASET / VALIDATION).read_text())["data"]:
            for paragraph in article["paragraphs"]:
                for question in paragraph["qas"]:
                    question["id"] = f"{question['id']}-{copy}"
            articles.append(article)
    (directory / VALIDATION).write_text(json.dumps({"version": "1.1", "data": articles}))


def timed(directory: Path, timed_file: str) -> dict[str, float]:
    """Validate `timed_file` of `directory` with the sample's file for the other split: MB and MB per CPU second."""
    files = {
        "train": [(directory if timed_file == TRAIN else SAMPLE_DATASET) / TRAIN],
        "validation": [(directory if timed_file == VALIDATION else SAMPLE_DATASET) / VALIDATION],
    }
    started = time.process_time()
    verdict = validate_dataset(
        files, directory, max_seq_length=384, doc_stride=128, max_windows_per_example=100, skip_invalid=False
    )
    seconds = time.process_time() - started
    assert verdict.error == "", verdict.error
    megabytes = (directory / timed_file).stat().st_size / 1e6
    return {"mb": megabytes, "cpu_s": seconds, "mb_per_s": megabytes / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        repeated_sample(directory, args.repeat)
        results = alternate(
            {"JSON Lines": lambda: timed(directory, TRAIN), "SQuAD JSON": lambda: timed(directory, VALIDATION)},
            args.rounds,
        )
    rows = [[name, f"{median(runs, 'mb'):.1f}", f"{median(runs, 'mb_per_s'):.1f}"] for name, runs in results.items()]
    print(table(rows, ["format", "MB", "MB/s (one core, median)"]))
    save("claim_validation_throughput", {"repeat": args.repeat, "rounds": results})


if __name__ == "__main__":
    main()
