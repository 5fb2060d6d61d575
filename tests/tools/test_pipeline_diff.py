"""make diff's second half: the pipeline definition step by step, deployed (DescribePipeline) vs synthesized.

Against moto server: the synthesized dev pipeline is created through the SageMaker API with stand-ins for its
deploy-time placeholders (tests/tools/moto_pipeline.py); moto stores the definition as given and answers
DescribePipeline with it (it does not validate it, which does not matter to a diff).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.tools.conftest import assert_one_line_error, run_cli
from tools.pipeline_diff import diff_definitions

DEPLOYED: dict[str, Any] = {
    "Version": "2020-12-01",
    "Parameters": [{"Name": "Epochs", "Type": "Float", "DefaultValue": 2.0}],
    "Steps": [
        {
            "Name": "FineTune",
            "Type": "Training",
            "Arguments": {
                "RoleArn": "arn:aws:iam::123456789012:role/hfqa-dev-job",
                "VpcConfig": {"Subnets": ["subnet-0a", "subnet-0b"]},
                "HyperParameters": {"epochs": "2", "learning_rate": "3e-05"},
            },
        },
        {
            "Name": "CheckF1",
            "Type": "Condition",
            "Arguments": {"IfSteps": [{"Name": "RegisterModel", "Type": "RegisterModel", "Arguments": {}}]},
        },
    ],
}


def synthesized() -> dict:
    """DEPLOYED as the synth holds it: the deploy-time values still ${...} placeholders."""
    definition = copy.deepcopy(DEPLOYED)
    definition["Steps"][0]["Arguments"]["RoleArn"] = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${JobRoleName}"
    definition["Steps"][0]["Arguments"]["VpcConfig"] = {"Subnets": ["${Subnet0}", "${Subnet1}"]}
    return definition


def test_placeholders_match_the_deployed_values():
    assert diff_definitions(DEPLOYED, synthesized()) == []


def test_a_changed_hyperparameter_is_one_leaf_of_one_step():
    new = synthesized()
    new["Steps"][0]["Arguments"]["HyperParameters"]["epochs"] = "3"
    assert diff_definitions(DEPLOYED, new) == [
        "~ step FineTune (Training)",
        '    Arguments.HyperParameters.epochs: "2" -> "3"',
    ]


def test_steps_inside_condition_branches_and_parameters_are_compared():
    new = synthesized()
    branch = new["Steps"][1]["Arguments"]["IfSteps"]
    branch[0] = {"Name": "RecordModel", "Type": "Lambda", "Arguments": {}}
    new["Parameters"].append({"Name": "EvalBatchSize", "Type": "Integer", "DefaultValue": 32})
    new["Parameters"][0]["DefaultValue"] = 3.0
    lines = diff_definitions(DEPLOYED, new)
    assert "+ parameter EvalBatchSize (Integer, default 32)" in lines
    assert "~ parameter Epochs" in lines and "    DefaultValue: 2.0 -> 3.0" in lines
    assert "+ step RecordModel (Lambda)" in lines and "- step RegisterModel (RegisterModel)" in lines
    assert "~ step CheckF1 (Condition)" in lines  # its branch now names another step


def test_a_list_of_placeholders_must_keep_its_length():
    new = synthesized()
    new["Steps"][0]["Arguments"]["VpcConfig"]["Subnets"].append("${Subnet2}")
    assert diff_definitions(DEPLOYED, new)[1].startswith("    Arguments.VpcConfig.Subnets: ")


def test_a_placeholder_does_not_hide_a_changed_literal():
    new = synthesized()
    new["Steps"][0]["Arguments"]["RoleArn"] = "arn:${AWS::Partition}:iam::${AWS::AccountId}:user/${JobRoleName}"
    assert diff_definitions(DEPLOYED, new)[0] == "~ step FineTune (Training)"


def test_the_deployed_pipeline_matches_its_synth_then_shows_a_change(moto_pipeline, aws, dev):
    assembly = str(dev.assembly)
    same = run_cli("tools.pipeline_diff", "--env", "dev", "--assembly", assembly, env=aws)
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[1:] == ["  no differences"], same.stdout
    changed = json.loads(moto_pipeline.definition)
    changed["Parameters"][0]["DefaultValue"] = "changed-by-hand"
    moto_pipeline.replace(json.dumps(changed))
    result = run_cli("tools.pipeline_diff", "--env", "dev", "--assembly", assembly, env=aws)
    name = changed["Parameters"][0]["Name"]
    assert f"  ~ parameter {name}" in result.stdout.splitlines(), result.stdout
    assert '"changed-by-hand" ->' in result.stdout


def test_not_deployed_says_so(moto_pipeline, aws, dev):
    moto_pipeline.replace(None)
    result = run_cli("tools.pipeline_diff", "--env", "dev", "--assembly", str(dev.assembly), env=aws)
    assert result.returncode == 0 and "is not deployed" in result.stdout


def test_without_an_assembly_is_one_line(aws, tmp_path):
    result = run_cli("tools.pipeline_diff", "--env", "dev", "--assembly", str(tmp_path), env=aws)
    assert_one_line_error(result, "no cloud assembly", "first")
