"""The project's folders import one another one way only: config -> pipeline_steps -> stacks -> reporting, the
tools and the local runner side by side on top (neither imports the other), training_code (the containers'
code) importing nothing of the rest."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import TopologicalSorter
from pathlib import Path

from config.paths import PROJECT_ROOT, TRAINING_CODE

# Folder (or app.py) -> the folders its modules may import, lazily or for type checking included.
MAY_IMPORT: dict[str, set[str]] = {
    "training_code": set(),
    "config": {"training_code"},
    "pipeline_steps": {"config", "training_code"},
    "stacks": {"config", "pipeline_steps", "training_code"},
    "reporting": {"config", "pipeline_steps", "training_code"},
    "tools": {"config", "pipeline_steps", "stacks", "reporting", "training_code"},
    "local_runner": {"config", "pipeline_steps", "stacks", "reporting", "training_code"},
    "bench": {"config", "pipeline_steps", "tools", "local_runner", "training_code"},
    "app": {"config", "pipeline_steps", "stacks"},
}
# What the containers import as top-level names (their code folder is on sys.path there).
CONTAINER_MODULES = {p.stem for p in TRAINING_CODE.glob("*.py")} | {
    p.name for p in TRAINING_CODE.iterdir() if (p / "__init__.py").is_file()
}


def room(imported: str) -> str | None:
    """The project folder that an absolute import names; None for the standard library and third parties."""
    top = imported.split(".", 1)[0]
    if top in CONTAINER_MODULES:
        return "training_code"
    return top if top in MAY_IMPORT else None


def imported_names(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def imports_between_rooms() -> dict[str, dict[str, set[str]]]:
    """Folder -> imported folder -> the files that import it."""
    found: dict[str, dict[str, set[str]]] = {name: {} for name in MAY_IMPORT}
    for name in MAY_IMPORT:
        files = [PROJECT_ROOT / "app.py"] if name == "app" else sorted((PROJECT_ROOT / name).rglob("*.py"))
        for path in files:
            for imported in imported_names(path):
                target = room(imported)
                if target is not None and target != name:
                    found[name].setdefault(target, set()).add(str(path.relative_to(PROJECT_ROOT)))
    return found


def test_each_folder_imports_only_the_folders_below_it():
    found = imports_between_rooms()
    wrong = {
        f"{name} -> {target}": sorted(files)
        for name, targets in found.items()
        for target, files in targets.items()
        if target not in MAY_IMPORT[name]
    }
    assert wrong == {}
    # The rule is not vacuous: the layers it names are really imported.
    assert "training_code" in found["pipeline_steps"] and "reporting" in found["local_runner"]


def test_the_allowed_imports_have_no_cycle_and_keep_the_tools_and_the_local_runner_apart():
    """So no two folders import each other, directly or through a third; what the tools and the local runner
    share (the assembly reader, the run record and its report) lives below both."""
    order = list(TopologicalSorter(MAY_IMPORT).static_order())  # raises CycleError on a cycle
    assert order.index("training_code") == 0
    assert "local_runner" not in MAY_IMPORT["tools"] and "tools" not in MAY_IMPORT["local_runner"]


def test_an_import_of_the_local_runner_from_the_tools_would_be_caught(tmp_path):
    module = tmp_path / "summarize.py"
    module.write_text("def f():\n    from local_runner.assembly import find_pipeline_stack\n")
    assert [room(name) for name in imported_names(module)] == ["local_runner"]
    assert "local_runner" not in MAY_IMPORT["tools"]
