"""What a model archive carries for serving: the entry point inference.py and the `qa` package in
`<model dir>/code/`, where the Hugging Face inference toolkit looks for them (see inference.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

CODE_DIR = "code"


def copy_into(model_dir: Path) -> Path:
    """Put inference.py and the `qa` package into `<model_dir>/code`, where the toolkit looks for them."""
    package = Path(__file__).resolve().parent
    target = model_dir / CODE_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(package.parent / "inference.py", target / "inference.py")
    shutil.copytree(package, target / "qa", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return target
