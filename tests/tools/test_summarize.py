"""The synth summary: every step of the graph (through conditions), the user-facing outputs only."""

from __future__ import annotations

import json

from pipeline_steps.walk import all_steps
from stacks.assembly import synthesized_definition
from tools.summarize import GENERATED_OUTPUT_PREFIX, step_tree, summarize


def test_every_step_is_listed_through_the_conditions(dev):
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    text = summarize(dev.assembly)
    names = [step["Name"] for step in all_steps(definition["Steps"])]
    assert any(
        step["Type"] == "Condition" and step["Arguments"].get("IfSteps") for step in all_steps(definition["Steps"])
    )
    for name in names:
        assert f" {name} (" in text, name


def test_branches_are_indented_under_their_condition():
    steps = [
        {"Name": "Train", "Type": "Training", "Arguments": {}},
        {
            "Name": "Gate",
            "Type": "Condition",
            "DependsOn": ["Train"],
            "Arguments": {
                "IfSteps": [{"Name": "Register", "Type": "RegisterModel", "Arguments": {}}],
                "ElseSteps": [],
            },
        },
    ]
    assert step_tree(steps) == [
        "Train (Training)",
        "Gate (Condition)",
        "  if true:",
        "    Register (RegisterModel)",
        "  else: stop, succeeded",
    ]


def test_only_user_facing_outputs_are_listed(dev):
    outputs = dev.templates["pipeline"]["Outputs"]
    text = summarize(dev.assembly)
    assert GENERATED_OUTPUT_PREFIX not in text
    for name in (n for n in outputs if not n.startswith(GENERATED_OUTPUT_PREFIX)):
        assert f"output {name}: " in text
    generated = [
        n for t in dev.templates.values() for n in t.get("Outputs", {}) if n.startswith(GENERATED_OUTPUT_PREFIX)
    ]
    assert generated, "the test needs a stack with CDK's generated export outputs to show they are left out"
