"""What a model archive carries for serving: the entry point inference.py and the `qa` and `tasks` packages in
`<model dir>/code/`, where the Hugging Face inference toolkit looks for them (see inference.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from qa.outputs import MODEL_CODE_DIR, SERVING_PROGRAM


def copy_into(model_dir: Path) -> Path:
    """Put inference.py and the `qa` and `tasks` packages into `<model_dir>/code`, where the toolkit looks for them."""
    package = Path(__file__).resolve().parent
    target = model_dir / MODEL_CODE_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(package.parent / SERVING_PROGRAM, target / SERVING_PROGRAM)
    for name in ("qa", "tasks"):
        source = package.parent / name
        shutil.copytree(source, target / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return target
