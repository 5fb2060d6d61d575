"""Ask a registered model questions as its SageMaker endpoint would answer them.

The Hugging Face inference toolkit unpacks model.tar.gz into the model directory, imports the module that
the container's SAGEMAKER_PROGRAM names from `<model dir>/code`, calls `model_fn(model_dir)` once and
`predict_fn(request, model)` per request, JSON in and out; a request that fails is answered with an error and
the container goes on serving (sagemaker-huggingface-inference-toolkit handler_service.py; sagemaker-inference
environment.py for SAGEMAKER_PROGRAM). Here the container is one fresh Python process with the container's
environment, so nothing from this process leaks into the answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from qa.outputs import MODEL_CODE_DIR, SAGEMAKER_PROGRAM_ENV

from local_runner.errors import InvocationFailed
from local_runner.launch import job_python

# The container: requests on stdin, one JSON reply per line on the original stdout; whatever the model code
# prints goes to stderr, so it cannot be mistaken for a reply.
SERVE = """
import importlib, json, os, sys, traceback
model_dir, module = sys.argv[1:]
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
handler = importlib.import_module(module)
model = handler.model_fn(model_dir)
for line in sys.stdin:
    try:
        reply = {"response": handler.predict_fn(json.loads(line), model)}
    except Exception:
        reply = {"error": traceback.format_exc()}
    replies.write(json.dumps(reply) + "\\n")
    replies.flush()
"""


class LocalEndpoint:
    """The model package's container serving in one local process: the model loads once, each `invoke` is one
    request. Use as a context manager; the process ends on leaving it."""

    def __init__(self, container: dict[str, Any], model_archive: Path, work_dir: Path) -> None:
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
        self._model_dir = model_dir
        self._log_path = work_dir / "endpoint.log"
        self._log = self._log_path.open("w", encoding="utf-8")
        self._process = subprocess.Popen(
            [job_python(), "-c", SERVE, str(model_dir), program.removesuffix(".py")],
            cwd=work_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )

    def invoke(self, request: dict[str, Any]) -> Any:
        """The container's response to one JSON request; InvocationFailed with the model's error if it fails."""
        stdin, stdout = self._pipes()
        try:
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
        except BrokenPipeError:
            pass  # the container has exited: reported below, with its log
        line = stdout.readline()
        if not line:
            code = self._process.wait()
            raise InvocationFailed(f"the model failed to answer (exit code {code}):\n{self._log_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise InvocationFailed(f"the model failed to answer this request:\n{reply['error'][-3000:]}")
        return reply["response"]

    def close(self) -> None:
        """End the container; its unpacked model goes with it, as an endpoint's disk does."""
        stdin, _ = self._pipes()
        stdin.close()
        self._process.wait(timeout=60)
        self._log.close()
        shutil.rmtree(self._model_dir, ignore_errors=True)

    def __enter__(self) -> LocalEndpoint:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self._process.stdin is not None and self._process.stdout is not None
        return self._process.stdin, self._process.stdout

    def _log_tail(self) -> str:
        self._log.flush()
        return self._log_path.read_text(encoding="utf-8", errors="replace")[-3000:]


def invoke(container: dict[str, Any], model_archive: Path, work_dir: Path, request: dict[str, Any]) -> Any:
    """The response of the model package's container to one JSON request."""
    with LocalEndpoint(container, model_archive, work_dir) as endpoint:
        return endpoint.invoke(request)
