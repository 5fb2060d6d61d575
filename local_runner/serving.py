"""Ask a registered model a question as its SageMaker endpoint would answer it.

The Hugging Face inference toolkit unpacks model.tar.gz into the model directory, imports the module that
the container's SAGEMAKER_PROGRAM names from `<model dir>/code`, calls `model_fn(model_dir)` once and
`predict_fn(request, model)` per request, JSON in and out (sagemaker-huggingface-inference-toolkit
handler_service.py; sagemaker-inference environment.py for SAGEMAKER_PROGRAM). Here that runs in a fresh
Python process with the container's environment, so nothing from this process leaks into the answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from qa.outputs import MODEL_CODE_DIR, SAGEMAKER_PROGRAM_ENV

from local_runner.errors import InvocationFailed

SERVE = """
import importlib, json, sys
model_dir, module, request = sys.argv[1:]
handler = importlib.import_module(module)
print(json.dumps(handler.predict_fn(json.loads(request), handler.model_fn(model_dir))))
"""


def invoke(container: dict[str, Any], model_archive: Path, work_dir: Path, request: dict[str, Any]) -> Any:
    """The response of the model package's container to one JSON request."""
    environment = {k: str(v) for k, v in container.get("Environment", {}).items()}
    program = environment.get(SAGEMAKER_PROGRAM_ENV, "")
    if not program:
        raise InvocationFailed(
            "the registered container sets no SAGEMAKER_PROGRAM: the inference toolkit would build a "
            "transformers pipeline from HF_TASK, and transformers >= 5.3 has none for question answering"
        )
    model_dir = work_dir / "model"
    shutil.rmtree(model_dir, ignore_errors=True)
    model_dir.mkdir(parents=True)
    with tarfile.open(model_archive) as tar:
        tar.extractall(model_dir, filter="data")
    if not (model_dir / MODEL_CODE_DIR / program).is_file():
        raise InvocationFailed(
            f"{container['ModelDataUrl']} has no {MODEL_CODE_DIR}/{program} for {SAGEMAKER_PROGRAM_ENV}={program}"
        )
    env = {
        **os.environ,
        **environment,
        "PYTHONPATH": str(model_dir / MODEL_CODE_DIR),
        "TOKENIZERS_PARALLELISM": "false",
    }
    result = subprocess.run(
        [sys.executable, "-c", SERVE, str(model_dir), program.removesuffix(".py"), json.dumps(request)],
        cwd=work_dir,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise InvocationFailed(f"the model failed to answer (exit code {result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
