"""What a model archive carries for serving: the entry point inference.py and the `qa` package in
`<model dir>/code/`, where the Hugging Face inference toolkit looks for them (see inference.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from qa.outputs import MODEL_CODE_DIR, SERVING_PROGRAM


def copy_into(model_dir: Path) -> Path:
    """Put inference.py and the `qa` package into `<model_dir>/code`, where the toolkit looks for them."""
    package = Path(__file__).resolve().parent
    target = model_dir / MODEL_CODE_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(package.parent / SERVING_PROGRAM, target / SERVING_PROGRAM)
    shutil.copytree(package, target / "qa", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return target
