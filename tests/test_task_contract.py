"""Nothing outside training_code/tasks/ branches on a task's name: the pipeline, stacks, tools, local runner,
report and the shared training code read the facts a task module declares (README, "Tasks"). This reads their
code and fails on a comparison with a task name (`task == "text-classification"`, `in ("question-answering", ...)`),
a `match` case on one, or a dict keyed by one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tasks import TASK_NAMES

from config.paths import PROJECT_ROOT, TRAINING_CODE

CHECKED_ROOTS = ("config", "pipeline_steps", "stacks", "tools", "local_runner", "reporting", "training_code")
TASK_MODULES = TRAINING_CODE / "tasks"


def checked_files() -> list[Path]:
    """Every Python file of the checked folders, the task modules left out."""
    return [
        path
        for root in CHECKED_ROOTS
        for path in sorted((PROJECT_ROOT / root).rglob("*.py"))
        if not path.is_relative_to(TASK_MODULES)
    ]


def names_in(node: ast.AST | None) -> set[str]:
    """The task names `node` spells as string literals: itself, or the items of a tuple, list or set literal."""
    if isinstance(node, ast.Constant) and node.value in TASK_NAMES:
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {name for item in node.elts for name in names_in(item)}
    return set()


def task_name_branches(source: str, filename: str = "<snippet>") -> list[str]:
    """`file:line: what` for each place in `source` that branches on, or is keyed by, a task name."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            spelled = set().union(*(names_in(operand) for operand in [node.left, *node.comparators]))
            what = "a comparison with"
        elif isinstance(node, ast.match_case):
            spelled = {
                pattern.value.value
                for pattern in ast.walk(node.pattern)
                if isinstance(pattern, ast.MatchValue)
                and isinstance(pattern.value, ast.Constant)
                and pattern.value.value in TASK_NAMES
            }
            what = "a match case on"
        elif isinstance(node, ast.Dict):
            spelled = set().union(*(names_in(key) for key in node.keys))
            what = "a dict keyed by"
        else:
            continue
        line = node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno
        found += [f"{filename}:{line}: {what} {name!r}" for name in sorted(spelled)]
    return found


def test_the_checked_folders_hold_code() -> None:
    """A moved folder would leave nothing to check."""
    folders = {path.relative_to(PROJECT_ROOT).parts[0] for path in checked_files()}
    assert folders == set(CHECKED_ROOTS)


def test_no_code_outside_the_task_modules_branches_on_a_task_name() -> None:
    found = [
        branch
        for path in checked_files()
        for branch in task_name_branches(path.read_text(encoding="utf-8"), str(path.relative_to(PROJECT_ROOT)))
    ]
    assert not found, "read the task module's declared facts instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        (f"if task == {TASK_NAMES[1]!r}:\n    pass", "a comparison with"),
        (f"ok = {TASK_NAMES[2]!r} != name", "a comparison with"),
        (f"ok = name in ({TASK_NAMES[0]!r}, 'other')", "a comparison with"),
        (f"match task:\n    case {TASK_NAMES[1]!r}:\n        pass", "a match case on"),
        (f"match task:\n    case 'x' | {TASK_NAMES[2]!r}:\n        pass", "a match case on"),
        (f"METRICS = {{{TASK_NAMES[0]!r}: ('f1',)}}", "a dict keyed by"),
    ],
)
def test_a_branch_on_a_task_name_is_found(snippet: str, what: str) -> None:
    [found] = task_name_branches(snippet)
    assert f"<snippet>:{1 if 'match' not in snippet else 2}: {what} " in found


def test_reading_a_task_s_facts_is_not_a_branch() -> None:
    snippet = (
        "from tasks import DEFAULT_TASK, task\n"
        f"module = task(settings.get('task', {TASK_NAMES[0]!r}))\n"
        "if module.USES_LABEL_NAMES and metric == module.GATE_METRIC:\n    pass\n"
        "lines = {name: value for name, value in metrics.items()}\n"
    )
    assert task_name_branches(snippet) == []
