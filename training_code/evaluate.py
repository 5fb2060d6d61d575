#!/usr/bin/env python3
"""Score a fine-tuned QA model on the validation set: SQuAD v1.1 EM/F1 (processing job).

Superseded by the evaluation inside the training job (train.py, qa/evaluation.py); kept only while the
pipeline still has its Evaluate processing step.

Container layout (SageMaker Processing), each overridable by a flag:
  /opt/ml/processing/input/model/         the trained model: a directory or SageMaker's model.tar.gz
  /opt/ml/processing/input/validation/    features.npz, example_ids.json, examples.jsonl from preprocess.py
  /opt/ml/processing/output/evaluation/   evaluation.json (model-quality metrics shape) + predictions.json
"""

from __future__ import annotations

import argparse
import glob
import sys
import tarfile
import tempfile
from pathlib import Path

from qa.cli import setup_logging

PROCESSING = "/opt/ml/processing"
GPU_DEVICE_FILES = "/dev/nvidia[0-9]*"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=Path(f"{PROCESSING}/input/model"))
    parser.add_argument("--validation-dir", type=Path, default=Path(f"{PROCESSING}/input/validation"))
    parser.add_argument("--output-dir", type=Path, default=Path(f"{PROCESSING}/output/evaluation"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--n-best-size", type=int, default=20)
    parser.add_argument("--max-answer-length", type=int, default=30)
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="auto: cuda on GPU instances")
    return parser.parse_args(argv)


def locate_model(model_dir: Path, scratch: Path) -> Path:
    """The directory holding config.json: `model_dir` itself, or model.tar.gz unpacked into `scratch`."""
    if (model_dir / "config.json").is_file():
        return model_dir
    archive = model_dir / "model.tar.gz" if model_dir.is_dir() else model_dir
    if not archive.is_file():
        raise FileNotFoundError(f"no config.json or model.tar.gz in {model_dir}")
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and paths outside scratch
            tar.extractall(scratch, filter="data")
        else:  # pragma: no cover - older images
            tar.extractall(scratch)
    return scratch


def choose_device(requested: str) -> str:
    """cuda or cpu. `auto` means cuda where the instance has NVIDIA GPUs (their device files are visible in
    the container, as on ml.g5/ml.p* instances) and cpu elsewhere. GPUs that CUDA cannot use (driver older
    than the image's CUDA, no GPU passed through) raise instead of falling back to a CPU run that would take
    hours and look like success."""
    import torch

    gpus = sorted(glob.glob(GPU_DEVICE_FILES))
    if requested == "cpu" or (requested == "auto" and not gpus):
        return "cpu"
    if not torch.cuda.is_available():
        seen = f"this instance has NVIDIA GPUs ({', '.join(gpus)})" if gpus else "--device cuda was requested"
        raise RuntimeError(
            f"{seen} but CUDA is unusable here (torch {torch.__version__}, built for CUDA {torch.version.cuda}); "
            "refusing to evaluate on CPU. Run the evaluation on an image whose CUDA the instance's driver "
            "supports, or pass --device cpu"
        )
    return "cuda"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = setup_logging()
    try:
        device = choose_device(args.device)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    from qa.answering import QuestionAnswerer
    from qa.evaluation import ValidationSet, score

    validation = ValidationSet.load(args.validation_dir)
    with tempfile.TemporaryDirectory() as scratch:
        model_path = locate_model(args.model_dir, Path(scratch))
        log.info(
            "predicting %d features of %d examples with %s on %s",
            len(validation.features),
            len(validation.examples),
            model_path,
            device,
        )
        start_logits, end_logits = QuestionAnswerer(model_path, device).logits(validation.features, args.batch_size)
    evaluation = score(validation, start_logits, end_logits, args.n_best_size, args.max_answer_length)
    evaluation.write(args.output_dir, args.output_dir)
    print(evaluation.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
