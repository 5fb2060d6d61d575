"""Serve the fine-tuned model behind a SageMaker endpoint with the Hugging Face inference toolkit.

transformers 5.3 removed the question-answering pipeline, so the toolkit's default (HF_TASK ->
`transformers.pipeline`) cannot serve every task on an image with transformers >= 5.3. Instead train.py copies this
module and the `qa` and `tasks` packages into `<model dir>/code/` of model.tar.gz (qa.serving_code), with the model's
task file (qa/task_file.py) beside the weights; the model package names this module with SAGEMAKER_PROGRAM=inference.py,
and the toolkit imports it from there and calls `model_fn(model_dir)` once and `predict_fn(request, model)` per request
(sagemaker-huggingface-inference-toolkit handler_service.py: `initialize`, `validate_and_initialize_user_module`). The
task's predict answers as the training job's evaluation scores, on transformers 4.49 and 5.x alike.

Request (application/json): {"inputs": <one input>} or {"inputs": [<input>, ...]}, optionally with "parameters"; what an
input is, which parameters apply and what comes back is the task's (its predict and PARAMETERS):
- question-answering: {"question", "context"} -> {"answer", "score", "start", "end"} (character offsets into the
  context, score the span's probability), as the former question-answering pipeline returned;
- text-classification: "<text>" or {"text", "text_pair"} -> [{"label", "score"}, ...] (top_k, default 1);
- token-classification: "<text>" or {"text"} -> [{"entity_group", "score", "word", "start", "end", "words"}, ...].
One input gets its answer, a list of inputs a list of answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class ServedModel:
    """The model of one task (in float32, as evaluation scored it) and its tokenizer, on one device."""

    task: ModuleType
    model: Any
    tokenizer: Any


def model_fn(model_dir: str) -> ServedModel:
    """The model, its task and its tokenizer from the unpacked model.tar.gz, on the GPU when there is one."""
    import torch
    import transformers
    from qa.base_model import FLOAT32_WEIGHTS
    from qa.task_file import read_task_file
    from tasks import DEFAULT_TASK, task

    served_task = task(read_task_file(Path(model_dir), DEFAULT_TASK).task)
    model = getattr(transformers, served_task.AUTO_MODEL).from_pretrained(model_dir, **FLOAT32_WEIGHTS)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    return ServedModel(served_task, model.to(device).eval(), tokenizer)


def predict_fn(data: dict[str, Any], model: ServedModel) -> Any:
    """The task's answer to one input, or to each of a list of inputs."""
    inputs = data.get("inputs", data)
    single = not isinstance(inputs, list)
    parameters = data.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise ValueError('"parameters" must be an object')
    answers = model.task.predict(model.model, model.tokenizer, [inputs] if single else inputs, parameters)
    return answers[0] if single else answers
