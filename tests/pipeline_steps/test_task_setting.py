"""The task is a setting of the pipeline: the definition reads the task module's declared facts (its name, resource
name, metrics and gate metric), for each task; question answering keeps what it had."""

from __future__ import annotations

import json
import re

import pytest
from qa.outputs import TRAINING_METRIC_REGEXES
from tasks import TASK_NAMES, task

from config import load_settings
from config.paths import PROJECT_ROOT
from pipeline_steps.definition import build_definition
from pipeline_steps.names import evaluation_key, uploader_validation_key
from tests.pipeline_steps.conftest import step
from tests.pipeline_steps.test_api_shapes import resolved

OTHER_TASKS = [name for name in TASK_NAMES if name != "question-answering"]


def sample_label_names(facts) -> list[str]:
    """The label names the task's bundled sample declares (its manifest.json)."""
    manifest = PROJECT_ROOT / "data" / facts.SAMPLE_DATASET / "manifest.json"
    return json.loads(manifest.read_text(encoding="utf-8"))["label_names"]


@pytest.fixture(scope="module", params=OTHER_TASKS)
def task_definitions(cdk_context, request):
    """(task module, dev definition, prod definition: the benchmark gate, its pin naming the sample's label names)
    of each task but question answering."""
    facts = task(request.param)
    labelled = {"evaluation.benchmark.label_names": json.dumps(sample_label_names(facts))}
    built = {
        env: build_definition(
            load_settings({**cdk_context, "env": env, "task": request.param, **(labelled if env == "prod" else {})})
        )
        for env in ("dev", "prod")
    }
    return facts, built["dev"], built["prod"]


def metric_values(line: str, definitions: list[dict[str, str]]) -> dict[str, float]:
    """What SageMaker would parse from `line` with these metric definitions (the last match of each regex)."""
    values = {}
    for definition in definitions:
        if match := re.search(definition["Regex"], line):
            values[definition["Name"]] = float(match.group(1))
    return values


def test_the_task_reaches_every_job_and_the_claim(task_definitions, cdk_context):
    facts, dev, _ = task_definitions
    assert json.loads(step(dev, "FineTune")["Arguments"]["HyperParameters"]["task"]) == facts.NAME
    assert step(dev, "ClaimManifest")["Arguments"]["Task"] == facts.NAME
    assert step(dev, "RecordModel")["Arguments"]["Task"] == facts.NAME
    cpu_job = build_definition(load_settings({**cdk_context, "task": facts.NAME, "processing.tokenize_in": "cpu_job"}))
    arguments = step(cpu_job, "ValidateAndTokenize")["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert arguments[arguments.index("--task") + 1] == facts.NAME


def test_the_claim_carries_the_benchmark_s_label_names_only_with_a_labelled_benchmark(task_definitions, cdk_context):
    facts, dev, prod = task_definitions
    claim = step(prod, "ClaimManifest")["Arguments"]
    assert json.loads(claim["BenchmarkLabelNames"]) == sample_label_names(facts)
    assert "BenchmarkLabelNames" not in step(dev, "ClaimManifest")["Arguments"]
    question_answering = build_definition(load_settings({**cdk_context, "env": "prod"}))
    assert "BenchmarkLabelNames" not in step(question_answering, "ClaimManifest")["Arguments"]


def test_the_metric_definitions_read_the_tasks_metrics_from_its_lines(task_definitions):
    facts, dev, prod = task_definitions
    values = {name: 50.0 + index for index, name in enumerate(facts.METRICS)}
    body = " ".join(f"{name}={value:.4f}" for name, value in values.items())
    for definition, prefixes in ((dev, ("eval",)), (prod, ("eval", "benchmark"))):
        definitions = step(definition, "FineTune")["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]
        names = [d["Name"] for d in definitions]
        expected = [f"{prefix}:{name}" for prefix in prefixes for name in facts.METRICS]
        assert names == [*TRAINING_METRIC_REGEXES, *expected]
        parsed = metric_values(f"evaluation: {body}", definitions)
        assert parsed == {f"eval:{name}": value for name, value in values.items()}
        if "benchmark" in prefixes:
            parsed = metric_values(f"benchmark: {body}", definitions)
            assert parsed == {f"benchmark:{name}": value for name, value in values.items()}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_gate_compares_the_tasks_gate_metric_and_names_it(task_definitions, env):
    facts, dev, prod = task_definitions
    definition, line, label = (dev, "eval", "Validation") if env == "dev" else (prod, "benchmark", "Benchmark")
    gated = {"Get": f"Steps.FineTune.FinalMetricDataList['{line}:{facts.GATE_METRIC}'].Value"}
    check = step(definition, "CheckF1")["Arguments"]
    [condition] = check["Conditions"]
    assert condition["LeftValue"] == gated and condition["RightValue"] == {"Get": "Parameters.F1Threshold"}
    [fail] = check["ElseSteps"]
    message = fail["Arguments"]["ErrorMessage"]["Std:Join"]["Values"]
    assert message[:2] == [f"{label} {facts.GATE_METRIC.upper()}", gated]
    [register] = check["IfSteps"]
    arguments = register["Arguments"]
    assert arguments["ModelPackageGroupName"] == f"hfqa-{env}-{facts.RESOURCE_NAME}-models"
    metadata = arguments["CustomerMetadataProperties"]
    assert metadata[evaluation_key(facts.GATE_METRIC)] == {"Std:Join": {"On": "", "Values": [gated]}}
    assert (uploader_validation_key(facts.GATE_METRIC) in metadata) is (env == "prod")
    assert "evaluation_f1" not in metadata or facts.GATE_METRIC == "f1"
    run_time = {
        f"Steps.FineTune.FinalMetricDataList['{line}:{name}'].Value": str(i) for i, name in enumerate(facts.METRICS)
    }
    record = step(definition, "RecordModel")["Arguments"]
    assert json.loads(resolved(record["Metrics"], run_time)) == {name: i for i, name in enumerate(facts.METRICS)}


def test_question_answering_keeps_its_group_name(settings):
    assert settings.task == "question-answering" and settings.model_package_group_name == "hfqa-dev-qa-models"
