"""The README's settings table is what tools/settings_table.py generates from config/settings.py and cdk.json."""

from __future__ import annotations

import pytest

from config import read_cdk_json_context
from config.paths import CDK_JSON
from config.settings import EvaluationSettings, Settings
from tools import settings_table
from tools.deployment import ToolError


def _table() -> str:
    return settings_table.table(read_cdk_json_context(CDK_JSON))


def _row(table: str, key: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| `{key}` |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_the_readme_table_is_the_generated_one():
    readme = settings_table.README.read_text(encoding="utf-8")
    regenerated = settings_table.replace_table(readme, _table())
    assert readme == regenerated, (
        f"README.md's settings table differs from config/settings.py + cdk.json: run {settings_table.WRITE_COMMAND}"
    )


def test_every_setting_has_a_row_with_where_it_is_enforced():
    keys = [key for key, _, _ in settings_table.rows()]
    for section in ("network", "model", "training", "hyperparameters", "processing", "evaluation", "tracking"):
        model = type(getattr(Settings(env_name="dev"), section))
        assert {f"{section}.{field}" for field in model.model_fields} <= set(keys)
    assert "env_name" not in keys, "set by the loader from -c env=..., not a setting"
    assert all(where for _, _, where in settings_table.rows())
    assert len(keys) == len(set(keys))


def test_defaults_and_each_environments_value_come_from_the_code_and_cdk_json():
    context = read_cdk_json_context(CDK_JSON)
    row = _row(_table(), "evaluation.f1_threshold")
    values = [context["environments"][env]["evaluation"]["f1_threshold"] for env in ("dev", "prod")]
    assert row[1:4] == [f"`{EvaluationSettings().f1_threshold:g}`", *(f"`{v:g}`" for v in values)]
    assert _row(_table(), "training.max_instance_count")[-1] == "claim step, make start", "the field's own metadata"
    assert _row(_table(), "hyperparameters.seed")[-1] == "FineTune (train.py)", "its section's ENFORCED_BY"
    benchmark = _row(_table(), "evaluation.benchmark.name")
    assert benchmark[1:4] == ["required", "", f"`{context['environments']['prod']['evaluation']['benchmark']['name']}`"]


def test_a_new_environment_gets_a_column():
    context = read_cdk_json_context(CDK_JSON)
    context["environments"] = {**context["environments"], "staging": {"training": {"use_spot": False}}}
    table = settings_table.table(context)
    assert table.splitlines()[0] == "| setting | default | dev | prod | staging | enforced by |"
    assert _row(table, "training.use_spot")[4] == "`false`"


def test_replacing_keeps_the_text_around_the_markers():
    text = f"before\n{settings_table.BEGIN}\nold\n{settings_table.END}\nafter\n"
    assert (
        settings_table.replace_table(text, "new")
        == f"before\n{settings_table.BEGIN}\nnew\n{settings_table.END}\nafter\n"
    )
    with pytest.raises(ToolError, match="markers"):
        settings_table.replace_table("no markers", "new")
