"""`-c task=text-classification`: the synthesized stacks deploy that task's pipeline (its model package group, its
FineTune --task and metric definitions, its gate, the notifications' metric) from the task module's facts."""

from __future__ import annotations

import json

import pytest
from qa import notifications as contract
from tasks import task

from pipeline_steps.names import evaluation_key
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from tests.conftest import resources_of_type, synthesize

TASK = "text-classification"


@pytest.fixture(scope="module")
def text_classification(cdk_context, tmp_path_factory):
    """dev, synthesized with -c task=text-classification (one more App: about 15 s)."""
    return synthesize({**cdk_context, "task": TASK}, tmp_path_factory.mktemp("cdk.out-task"))["dev"]


def test_the_stacks_deploy_the_tasks_group_job_and_gate(text_classification):
    facts, template = task(TASK), text_classification.templates["pipeline"]
    group = f"hfqa-dev-{facts.RESOURCE_NAME}-models"
    [resource] = resources_of_type(template, "AWS::SageMaker::ModelPackageGroup").values()
    assert resource["Properties"]["ModelPackageGroupName"] == group
    definition = json.loads(synthesized_definition(template)[0])
    train = find_step(definition, "FineTune")["Arguments"]
    assert json.loads(train["HyperParameters"]["task"]) == TASK
    metric_names = [d["Name"] for d in train["AlgorithmSpecification"]["MetricDefinitions"]]
    assert [name for name in metric_names if name.startswith("eval:")] == [f"eval:{m}" for m in facts.METRICS]
    [condition] = find_step(definition, "CheckF1")["Arguments"]["Conditions"]
    assert condition["LeftValue"] == {"Get": f"Steps.FineTune.FinalMetricDataList['eval:{facts.GATE_METRIC}'].Value"}
    assert find_step(definition, "RegisterModel-RegisterModel")["Arguments"]["ModelPackageGroupName"] == group


def test_the_notifications_quote_the_tasks_gate_metric_and_watch_its_group(text_classification):
    facts, template = task(TASK), text_classification.templates["pipeline"]
    [notifier] = [
        function
        for function in resources_of_type(template, "AWS::Lambda::Function").values()
        if contract.F1_METADATA_KEY_ENV in function["Properties"].get("Environment", {}).get("Variables", {})
    ]
    variables = notifier["Properties"]["Environment"]["Variables"]
    assert variables[contract.F1_METADATA_KEY_ENV] == evaluation_key(facts.GATE_METRIC) == "evaluation_macro_f1"
    watched = [
        rule["Properties"]["EventPattern"]["detail"]["ModelPackageGroupName"]
        for rule in resources_of_type(template, "AWS::Events::Rule").values()
        if "ModelPackageGroupName" in rule["Properties"]["EventPattern"].get("detail", {})
    ]
    assert watched and all(names == [f"hfqa-dev-{facts.RESOURCE_NAME}-models"] for names in watched)
