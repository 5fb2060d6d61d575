"""Load SQuAD-format datasets and validate every record, collecting all problems at once.

Accepted files: SQuAD v1.1 JSON (`data[].paragraphs[].qas[]`) and flattened JSON Lines with one record per
line (`id, title, context, question, answers{text[], answer_start[]}`).

A dataset is described by a manifest in SageMaker's ManifestFile format, whose keys are relative to the
prefix and whose first path segment names the split:

    [{"prefix": "s3://bucket/datasets/squad/v1/"}, "train/train-v1.1.json", "validation/dev-v1.1.json"]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPLITS = ("train", "validation")
MANIFEST_HINT = 'a JSON list: [{"prefix": "s3://bucket/path/"}, "train/<file>", "validation/<file>"]'


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, located precisely enough to fix it."""

    file: str
    location: str  # "line 12", "data[0].paragraphs[3].qas[1]" or "" for whole-file problems
    record_id: str | None
    field: str | None
    message: str
    hint: str
    record_level: bool = False  # True: dropping the record fixes it (what --skip-invalid does)

    def __str__(self) -> str:
        where = ":".join(part for part in (self.file, self.location) if part)
        parts = [where]
        if self.record_id is not None:
            parts.append(f"id={self.record_id}")
        if self.field:
            parts.append(f"field={self.field}")
        return f"{' '.join(parts)}: {self.message} (fix: {self.hint})"


@dataclass
class LoadReport:
    """Valid records per split, and everything that was wrong."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {s: [] for s in SPLITS})
    problems: list[Problem] = field(default_factory=list)
    invalid_records: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))


def summarize_problems(problems: list[Problem], limit: int = 200) -> str:
    lines = [f"{len(problems)} problem(s) in the dataset:"]
    lines += [f"  - {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)


def read_manifest(manifest_path: Path, data_dir: Path) -> tuple[dict[str, list[Path]], list[Problem]]:
    """Split -> files named by the manifest (resolved under `data_dir`), and manifest problems."""
    name = manifest_path.name
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, [Problem(str(manifest_path), "", None, None, "manifest not found", "upload the manifest last")]
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return {}, [Problem(name, "", None, None, f"manifest is not valid JSON: {err}", MANIFEST_HINT)]
    if not (isinstance(manifest, list) and manifest and isinstance(manifest[0], dict) and "prefix" in manifest[0]):
        return {}, [Problem(name, "", None, None, "manifest must start with a {'prefix': ...} object", MANIFEST_HINT)]
    files: dict[str, list[Path]] = {s: [] for s in SPLITS}
    problems = []
    for index, key in enumerate(manifest[1:], start=1):
        split = key.split("/", 1)[0] if isinstance(key, str) else None
        if split not in SPLITS or "/" not in key:
            problems.append(
                Problem(
                    name, f"entry {index}", None, None, f"{key!r} is not under train/ or validation/", MANIFEST_HINT
                )
            )
            continue
        path = data_dir / key
        if not path.is_file():
            problems.append(
                Problem(name, f"entry {index}", None, None, f"names {key}, which does not exist", "upload it first")
            )
            continue
        files[split].append(path)
    for split in SPLITS:
        if not files[split] and not any(p.location.startswith("entry") for p in problems):
            problems.append(Problem(name, "", None, None, f"no {split} file listed", f"add '{split}/<file>'"))
    return files, problems


def _flatten_squad_json(document: Any, file: str, problems: list[Problem]) -> Iterator[tuple[str, Any]]:
    """(record path, flattened record) for every question of a SQuAD v1.1 JSON document."""
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        problems.append(
            Problem(file, "", None, "data", "SQuAD JSON needs a top-level 'data' list", "use SQuAD v1.1 or JSON Lines")
        )
        return
    for a, article in enumerate(document["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            problems.append(Problem(file, f"data[{a}]", None, "paragraphs", "missing list", "add 'paragraphs': [...]"))
            continue
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                problems.append(
                    Problem(file, f"data[{a}].paragraphs[{p}]", None, "qas", "missing list", "add 'qas': [...]")
                )
                continue
            for q, qa in enumerate(qas):
                if not isinstance(qa, dict):
                    yield f"data[{a}].paragraphs[{p}].qas[{q}]", qa
                    continue
                answers = qa.get("answers")
                flat_answers: Any = answers
                if isinstance(answers, list) and all(isinstance(x, dict) for x in answers):
                    flat_answers = {
                        "text": [x.get("text") for x in answers],
                        "answer_start": [x.get("answer_start") for x in answers],
                    }
                yield (
                    f"data[{a}].paragraphs[{p}].qas[{q}]",
                    {
                        "id": qa.get("id"),
                        "title": article.get("title", ""),
                        "context": paragraph.get("context"),
                        "question": qa.get("question"),
                        "answers": flat_answers,
                    },
                )


@dataclass(frozen=True)
class UnparsableLine:
    """A JSON Lines line that is not JSON: an invalid record, not an invalid file."""

    message: str


def _read_records(path: Path, display: str, problems: list[Problem]) -> Iterator[tuple[str, Any]]:
    """(location, raw record) pairs from one file; unreadable content becomes problems."""
    raw = path.read_bytes()
    if not raw.strip():
        problems.append(Problem(display, "", None, None, "file is empty", "upload the complete file"))
        return
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        number = raw[: err.start].count(b"\n") + 1
        problems.append(Problem(display, f"line {number}", None, None, f"not UTF-8 ({err.reason})", "save as UTF-8"))
        return
    if path.suffix == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as err:
            problems.append(
                Problem(display, f"line {err.lineno}", None, None, f"invalid JSON: {err.msg}", "fix the JSON syntax")
            )
            return
        yield from _flatten_squad_json(document, display, problems)
    elif path.suffix in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield f"line {number}", json.loads(line)
            except json.JSONDecodeError as err:
                yield f"line {number}", UnparsableLine(f"invalid JSON: {err.msg}")
    else:
        problems.append(
            Problem(display, "", None, None, f"unknown file type '{path.suffix}'", "use .json (SQuAD) or .jsonl")
        )


def validate_record(record: Any, file: str, location: str) -> list[Problem]:
    """Every problem of one flattened record (empty when the record is usable)."""
    if isinstance(record, UnparsableLine):
        return [Problem(file, location, None, None, record.message, "one JSON object per line", record_level=True)]
    if not isinstance(record, dict):
        return [Problem(file, location, None, None, "record is not a JSON object", "one object per record", True)]
    record_id = record.get("id")
    rid = str(record_id) if record_id is not None else None

    def problem(field_name: str, message: str, hint: str) -> Problem:
        return Problem(file, location, rid, field_name, message, hint, record_level=True)

    problems = []
    if not isinstance(record_id, str) or not record_id.strip():
        problems.append(problem("id", "missing or not a non-empty string", "give every question a unique string id"))
    for name in ("context", "question"):
        value = record.get(name)
        if value is None:
            problems.append(problem(name, "missing", f"add '{name}'"))
        elif not isinstance(value, str):
            problems.append(problem(name, f"must be a string, got {type(value).__name__}", f"make '{name}' a string"))
        elif not value.strip():
            problems.append(problem(name, "is empty", f"remove the record or fill in '{name}'"))
    answers = record.get("answers")
    if not isinstance(answers, dict):
        problems.append(problem("answers", "missing or not an object", 'use {"text": [...], "answer_start": [...]}'))
        return problems
    texts, starts = answers.get("text"), answers.get("answer_start")
    if not isinstance(texts, list) or not isinstance(starts, list):
        problems.append(problem("answers", "text and answer_start must be lists", "wrap single answers in lists"))
        return problems
    if len(texts) != len(starts):
        problems.append(
            problem("answers", f"{len(texts)} texts but {len(starts)} answer_start values", "pair each text/start")
        )
        return problems
    if not texts:
        problems.append(problem("answers", "no answer", "SQuAD v1.1 needs at least one answer per question"))
    context = record.get("context") if isinstance(record.get("context"), str) else None
    for i, (text, start) in enumerate(zip(texts, starts, strict=True)):
        if not isinstance(text, str) or not text.strip():
            problems.append(problem(f"answers.text[{i}]", "empty or not a string", "give the answer text"))
            continue
        if not isinstance(start, int) or isinstance(start, bool):
            problems.append(
                problem(f"answers.answer_start[{i}]", f"must be an integer, got {start!r}", "character offset")
            )
            continue
        if context is None:
            continue
        if start < 0 or start + len(text) > len(context):
            problems.append(
                problem(
                    f"answers.answer_start[{i}]",
                    f"{start} puts the answer outside the context (length {len(context)})",
                    "use the character offset of the answer in the context",
                )
            )
        elif context[start : start + len(text)] != text:
            found = context[start : start + len(text)]
            problems.append(
                problem(
                    f"answers.answer_start[{i}]",
                    f"context at {start} reads {found!r}, not the answer {text!r}",
                    "fix answer_start (character offset, not bytes or tokens)",
                )
            )
    return problems


def load_dataset_files(files: dict[str, list[Path]], root: Path) -> LoadReport:
    """Read and validate every file; valid records are normalized to the flattened schema."""
    report = LoadReport()
    seen_ids: dict[str, str] = {}
    for split in SPLITS:
        for path in files.get(split, []):
            display = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            for location, record in _read_records(path, display, report.problems):
                problems = validate_record(record, display, location)
                record_id = record.get("id") if isinstance(record, dict) else None
                if isinstance(record_id, str) and record_id in seen_ids:
                    problems.append(
                        Problem(
                            display,
                            location,
                            record_id,
                            "id",
                            f"duplicate id (first seen at {seen_ids[record_id]})",
                            "ids must be unique across all files",
                            record_level=True,
                        )
                    )
                elif isinstance(record_id, str):
                    seen_ids[record_id] = f"{display}:{location}"
                if problems:
                    report.problems.extend(problems)
                    report.invalid_records[split] += 1
                    continue
                report.records[split].append(
                    {
                        "id": record["id"],
                        "title": str(record.get("title") or ""),
                        "context": record["context"],
                        "question": record["question"],
                        "answers": {
                            "text": list(record["answers"]["text"]),
                            "answer_start": list(record["answers"]["answer_start"]),
                        },
                    }
                )
    return report
