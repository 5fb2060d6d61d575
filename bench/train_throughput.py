"""Training throughput: our Accelerate loop vs the Hugging Face Trainer, same model/data/steps/schedule.

    python -m bench.train_throughput [--pairs 3] [--epoch-steps 20]

Baselines: the Trainer as the seed configures it (pad to max length 384), and the Trainer with dynamic
padding and length grouping (its strongest configuration). Every run trains two epochs over the same
features and is timed on the second. Runs alternate (A B C A B C ...); the table reports median samples/s,
the ratio to each baseline, and the mean loss of the timed epoch.
"""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path

from bench.common import alternate, median, run_python, run_train_py, save, table, training_parser, write_features
from config.paths import bundled_model_dir
from local_runner.demo_models import BUNDLED_MODEL_NAME, build_tiny_model


def ours(model: Path, features: Path, epoch_steps: int, batch: int) -> dict[str, float]:
    hyperparameters = ["--learning_rate", "3e-5", "--per_device_train_batch_size", str(batch)]
    return run_train_py(model, features, 1, epoch_steps, [*hyperparameters, "--warmup_ratio", "0.1"])


def trainer(model: Path, features: Path, epoch_steps: int, batch: int, pad: bool) -> dict[str, float]:
    out, _ = run_python(
        [
            "bench/trainer_baseline.py",
            "--model",
            str(model),
            "--train_dir",
            str(features),
            "--steps",
            str(2 * epoch_steps),
            "--warmup_measure",
            str(epoch_steps),
            "--batch",
            str(batch),
            "--pad_to_max_length",
            str(pad).lower(),
            "--group_by_length",
            str(not pad).lower(),
        ]
    )
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = training_parser(__doc__)
    args = parser.parse_args()
    minilm = bundled_model_dir()
    scratch = Path(tempfile.mkdtemp())
    features = write_features(scratch / "features", minilm, count=args.epoch_steps * args.batch)
    models = {"tiny (2x64)": build_tiny_model(scratch / "tiny", hidden_size=64), BUNDLED_MODEL_NAME: minilm}
    rows, payload = [], {}
    for label, model in models.items():
        print(f"{label}:", flush=True)
        runs = {
            "ours": partial(ours, model, features, args.epoch_steps, args.batch),
            "trainer_pad_384": partial(trainer, model, features, args.epoch_steps, args.batch, True),
            "trainer_dynamic": partial(trainer, model, features, args.epoch_steps, args.batch, False),
        }
        results = alternate(runs, args.pairs)
        sps = {name: median(values, "samples_per_second") for name, values in results.items()}
        loss = {name: median(values, "final_loss") for name, values in results.items()}
        payload[label] = {"runs": results, "median_samples_per_second": sps, "median_final_loss": loss}
        for name in runs:
            rows.append([label, name, f"{sps[name]:.1f}", f"{sps['ours'] / sps[name]:.2f}x", f"{loss[name]:.3f}"])
    print(table(rows, ["model", "configuration", "samples/s (median)", "ours / this", "mean loss (timed epoch)"]))
    print(f"saved {save('train_throughput', {'args': vars(args), 'results': payload})}")


if __name__ == "__main__":
    main()
