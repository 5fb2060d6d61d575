"""Serve the fine-tuned model behind a SageMaker endpoint with the Hugging Face inference toolkit.

transformers 5.3 removed the question-answering pipeline, so the toolkit's default (HF_TASK=question-answering
-> `transformers.pipeline`) cannot load this model on an image with transformers >= 5.3. Instead train.py
copies this module and the `qa` package into `<model dir>/code/` of model.tar.gz (qa.serving_code); the model
package names it with SAGEMAKER_PROGRAM=inference.py, and the toolkit imports it from there and calls
`model_fn(model_dir)` once and `predict_fn(request, model)` per request (sagemaker-huggingface-inference-toolkit
handler_service.py: `initialize`, `validate_and_initialize_user_module`). It answers as the training job's
evaluation scores: the same windows, n-best search and span rules, on transformers 4.49 and 5.x alike.

Request (application/json): {"inputs": {"question": "...", "context": "..."}} or a list of such objects,
optionally with "parameters": {"max_seq_length", "doc_stride", "max_answer_length"}.
Response: {"answer", "score", "start", "end"} per question (character offsets into the context, score the
span's probability), as the former question-answering pipeline returned.
"""

from __future__ import annotations

from typing import Any

PARAMETERS = ("max_seq_length", "doc_stride", "max_answer_length")


def model_fn(model_dir: str) -> Any:
    """The model and tokenizer from the unpacked model.tar.gz, on the GPU when there is one."""
    import torch
    from qa.answering import QuestionAnswerer

    return QuestionAnswerer(model_dir, "cuda" if torch.cuda.is_available() else "cpu")


def predict_fn(data: dict[str, Any], model: Any) -> dict[str, Any] | list[dict[str, Any]]:
    """Answer one {"question", "context"} object, or each of a list of them."""
    inputs = data.get("inputs", data)
    single = isinstance(inputs, dict)
    questions = [inputs] if single else inputs
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and isinstance(q.get("question"), str) and isinstance(q.get("context"), str)
        for q in questions
    ):
        raise ValueError('expected {"inputs": {"question": "<text>", "context": "<text>"}} or a list of such objects')
    parameters = data.get("parameters") or {}
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; supported: {', '.join(PARAMETERS)}")
    answers = [
        {"answer": span.text, "score": span.score, "start": span.start, "end": span.end}
        for span in model.answer(questions, **parameters)
    ]
    return answers[0] if single else answers
