"""The local runner trains the task the synthesized pipeline names, and refuses a TASK that disagrees."""

from __future__ import annotations

from typing import Any

import pytest
from tasks import DEFAULT_TASK, TASK_NAMES

from local_runner.__main__ import checked_task, sample_dataset
from local_runner.assembly import definition_task
from local_runner.errors import UnsupportedDefinition


def definition(training_task: str | None, processing_tasks: list[str]) -> dict[str, Any]:
    """A definition with one training step (its `task` hyperparameter JSON-encoded, as SageMaker passes text)
    inside a condition, and one processing step per `--task` given."""
    hyperparameters = {"epochs": "3"} | ({"task": f'"{training_task}"'} if training_task else {})
    training = {"Name": "Train", "Type": "Training", "Arguments": {"HyperParameters": hyperparameters}}
    processing = [
        {
            "Name": f"Prepare{index}",
            "Type": "Processing",
            "Arguments": {"AppSpecification": {"ContainerArguments": ["--epochs", "3", "--task", name]}},
        }
        for index, name in enumerate(processing_tasks)
    ]
    condition = {"Name": "Gate", "Type": "Condition", "Arguments": {"IfSteps": [training], "ElseSteps": []}}
    return {"Steps": [*processing, condition]}


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_task_is_the_one_every_job_is_given(name: str) -> None:
    assert definition_task(definition(name, [name, name])) == name


def test_a_definition_without_a_task_trains_the_default_task() -> None:
    assert definition_task(definition(None, [])) == DEFAULT_TASK


def test_jobs_given_different_tasks_are_refused() -> None:
    with pytest.raises(UnsupportedDefinition, match="different tasks"):
        definition_task(definition(TASK_NAMES[0], [TASK_NAMES[1]]))


def test_a_task_that_disagrees_with_the_assembly_is_refused_in_one_line() -> None:
    pipeline_task, other = TASK_NAMES[0], TASK_NAMES[1]
    with pytest.raises(ValueError) as refused:
        checked_task(pipeline_task, other)
    message = str(refused.value)
    assert "\n" not in message and other in message and pipeline_task in message
    assert pipeline_task == checked_task(pipeline_task, pipeline_task).NAME
    assert pipeline_task == checked_task(pipeline_task, None).NAME


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_default_dataset_is_the_task_s_bundled_sample(name: str) -> None:
    folder = sample_dataset(checked_task(name, None))
    assert folder.name == checked_task(name, None).SAMPLE_DATASET and folder.parent.name == "data"
