"""Load datasets and validate every record as its task's (training_code/tasks/), collecting all problems at once.

Accepted files (ACCEPTED_FORMATS), one record per example, with the task's fields (question answering: one SQuAD
record per question, `id, title, context, question, answers{text[], answer_start[]}`):
- SQuAD v1.1 JSON (`.json`, `data[].paragraphs[].qas[]`, question answering; other tasks read `.json` as JSON
  Lines), parsed whole: at most MAX_JSON_FILE_BYTES;
- JSON Lines (`.jsonl`, `.ndjson`), one record per line, read a line at a time;
- CSV (`.csv`) with the task's RECORD_COLUMNS, its JSON_COLUMNS a JSON value per cell, read a row at a time (stdlib
  `csv`);
- Parquet (`.parquet`) with those columns (e.g. `answers` a struct of two lists), read a row group at a time;
- a `datasets` `Dataset.save_to_disk` folder (its `state.json` names the Arrow files), or one of its `.arrow`
  files, read a record batch at a time.
The columnar formats (Parquet, Arrow) need pyarrow, which loads only for them: the upload tool has it and
converts them to JSON Lines (COLUMNAR_CONVERSION); the processing image has not (`columnar_reader_missing`).

A dataset is described by a manifest in SageMaker's ManifestFile format, whose keys are relative to the
prefix and whose first path segment names the split:

    [{"prefix": "s3://bucket/datasets/squad/v1/"}, "train/train-v1.1.json", "validation/dev-v1.1.json"]
"""

from __future__ import annotations

import codecs
import csv
import importlib.util
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from qa.outputs import MANIFEST_V2_FORMAT, SPLITS, manifest_key_split

ACCEPTED_FORMATS = (
    "SQuAD v1.1 JSON (.json), JSON Lines (.jsonl), Parquet (.parquet), CSV (.csv) or a datasets save_to_disk "
    "folder (.arrow)"
)
CONVERSION_HINT = "convert with datasets: Dataset.from_...(...).to_json('train.jsonl'), one SQuAD record per line"
# A SQuAD JSON document is parsed whole, at about 6x its size in memory; JSON Lines is read a line at a time.
MAX_JSON_FILE_BYTES = 1 << 30
COLUMNS = ("id", "title", "context", "question", "answers")
SAVED_DATASET_STATE = "state.json"  # what Dataset.save_to_disk writes beside its Arrow files
SAVED_DATASET_METADATA = (SAVED_DATASET_STATE, "dataset_info.json", "dataset_dict.json")
DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".parquet", ".csv", ".arrow")
COLUMNAR_SUFFIXES = (".parquet", ".arrow")
TABULAR_BATCH_ROWS = 1000
CSV_FIELD_LIMIT = 1 << 30  # the csv module refuses fields over 128 KiB by default; SQuAD contexts can be longer
COLUMNAR_CONVERSION = (
    "upload it with `python -m tools.upload_dataset`, which converts Parquet and save_to_disk data to JSON Lines"
)
MANIFEST_HINT = (
    f'{{"format": "{MANIFEST_V2_FORMAT}", "files": [{{"key": "train/<file>"}}, {{"key": "validation/<file>"}}]}} '
    '(make upload-dataset writes it), or a JSON list: [{"prefix": "s3://bucket/path/"}, "train/<file>", ...]'
)


# Messages name a record by file, location, id and field, never by its text: they reach the processing job's log
# (SageMaker's account-wide /aws/sagemaker/ProcessingJobs group, README "Where logs go"). An "id" longer than this,
# or with unprintable characters, is likely text in the id's place: it is described, not quoted.
MAX_SHOWN_ID_CHARS = 64
MAX_SHOWN_OFFSETS = 3  # where a mismatched answer does occur in its context: the first few offsets


def shown_id(record_id: str) -> str:
    """How a message names a record: its id, or the id's length when it cannot be one (see MAX_SHOWN_ID_CHARS)."""
    if len(record_id) <= MAX_SHOWN_ID_CHARS and record_id.isprintable():
        return record_id
    return f"<{len(record_id)} characters, not shown>"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, located precisely enough to fix it: where (file, location, id, field) and
    what, without quoting the record's text."""

    file: str
    location: str  # "line 12", "data[0].paragraphs[3].qas[1]" or "" for whole-file problems
    record_id: str | None
    field: str | None
    message: str
    hint: str
    record_level: bool = False  # True: dropping the record fixes it (what --skip-invalid does)

    @classmethod
    def whole_file(cls, file: str, message: str, hint: str) -> Problem:
        """A problem of the file itself (no location, record or field)."""
        return cls(file, "", None, None, message, hint)

    def __str__(self) -> str:
        where = ":".join(part for part in (self.file, self.location) if part)
        parts = [where]
        if self.record_id is not None:
            parts.append(f"id={shown_id(self.record_id)}")
        if self.field:
            parts.append(f"field={self.field}")
        return f"{' '.join(parts)}: {self.message} (fix: {self.hint})"


@dataclass
class LoadReport:
    """Valid records per split, and everything that was wrong."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {s: [] for s in SPLITS})
    problems: list[Problem] = field(default_factory=list)
    invalid_records: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    valid_records: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)  # record id -> (file, location) first seen


def summarize_problems(problems: list[Problem], limit: int = 200) -> str:
    lines = [f"{len(problems)} problem(s) in the dataset:"]
    lines += [f"  - {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)


def rejection(problems: list[Problem], skip_invalid: bool) -> str | None:
    """The refusal of a dataset with these problems (all of them, or with skip_invalid those of whole files): the
    summary and the error line that ValidateAndTokenize prints and ClaimManifest returns; None when nothing stops."""
    fatal = [p for p in problems if not (skip_invalid and p.record_level)]
    if not fatal:
        return None
    return (
        f"{summarize_problems(fatal)}\nerror: dataset rejected ({len(fatal)} problem(s)); fix them, or pass "
        "--skip-invalid true to drop invalid records"
    )


def none_left_error(valid_records: dict[str, int]) -> str | None:
    """The error line when a split has no valid record left (split -> valid records), else None."""
    empty = [split for split in SPLITS if not valid_records.get(split)]
    return f"error: no valid {' or '.join(empty)} records left" if empty else None


@dataclass(frozen=True)
class ManifestFile:
    """One data file of a manifest v2, as its upload stored it."""

    key: str  # relative to the manifest's folder
    version_id: str  # the S3 version id the upload created
    sha256: str
    size: int
    # A file uploaded in parts: the composite SHA-256 S3 stores for it ("<base64>-<parts>": SHA-256 has no
    # full-object checksum for multipart uploads), which a copy may keep instead of computing a full one.
    composite_sha256: str | None = None


def manifest_v2(
    dataset: str,
    version: str,
    files: list[ManifestFile],
    converted_from: dict[str, dict[str, str]] | None = None,
    task: str | None = None,
    label_names: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The manifest v2 document (qa.outputs.MANIFEST_V2_FORMAT) naming each data file at its version;
    `converted_from`: key -> the columnar file it was converted from ({"key", "format"}); `task` (the task the
    records are for; absent: the pipeline's) and `label_names` (ClassLabel names in index order), each written
    only when given (qa.declared_task reads them from the dataset folder)."""
    converted_from = converted_from or {}
    return {
        "format": MANIFEST_V2_FORMAT,
        "dataset": dataset,
        "version": version,
        **({"task": task} if task is not None else {}),
        **({"label_names": list(label_names)} if label_names is not None else {}),
        "files": [
            {
                "key": f.key,
                "version_id": f.version_id,
                "sha256": f.sha256,
                "size": f.size,
                **({"composite_sha256": f.composite_sha256} if f.composite_sha256 else {}),
                **({"converted_from": converted_from[f.key]} if f.key in converted_from else {}),
            }
            for f in files
        ],
    }


def read_manifest(manifest_path: Path, data_dir: Path) -> tuple[dict[str, list[Path]], list[Problem]]:
    """Split -> files named by the manifest (resolved under `data_dir`), and manifest problems. Reads manifest v2
    (qa.outputs.MANIFEST_V2_FORMAT: {"format", "dataset", "version", "files": [{"key", ...}]}, keys relative to
    the manifest's folder) and the older SageMaker ManifestFile list."""
    name = manifest_path.name
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, [Problem(str(manifest_path), "", None, None, "manifest not found", "upload the manifest last")]
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return {}, [Problem.whole_file(name, f"manifest is not valid JSON: {err}", MANIFEST_HINT)]
    if isinstance(manifest, dict) and manifest.get("format") == MANIFEST_V2_FORMAT:
        listed = manifest.get("files")
        if not isinstance(listed, list) or not all(
            isinstance(entry, dict) and isinstance(entry.get("key"), str) for entry in listed
        ):
            return {}, [Problem(name, "", None, "files", "needs a list of {'key': ...} objects", MANIFEST_HINT)]
        keys: list[Any] = [entry["key"] for entry in listed]
    elif isinstance(manifest, list) and manifest and isinstance(manifest[0], dict) and "prefix" in manifest[0]:
        keys = manifest[1:]
    else:
        return {}, [
            Problem.whole_file(
                name,
                f"manifest must be a {MANIFEST_V2_FORMAT} object or start with a {{'prefix': ...}} object",
                MANIFEST_HINT,
            )
        ]
    files: dict[str, list[Path]] = {s: [] for s in SPLITS}
    problems = []
    for index, key in enumerate(keys, start=1):
        split = manifest_key_split(key)
        if split is None:
            problems.append(
                Problem(
                    name, f"entry {index}", None, None, f"{key!r} is not under train/ or validation/", MANIFEST_HINT
                )
            )
            continue
        path = data_dir / key
        if not (path.is_file() or (path / SAVED_DATASET_STATE).is_file()):
            problems.append(
                Problem(name, f"entry {index}", None, None, f"names {key}, which does not exist", "upload it first")
            )
            continue
        files[split].append(path)
    for split in SPLITS:
        if not files[split] and not any(p.location.startswith("entry") for p in problems):
            problems.append(Problem.whole_file(name, f"no {split} file listed", f"add '{split}/<file>'"))
    return files, problems


def is_columnar(path: Path) -> bool:
    """Whether reading `path` needs pyarrow: a Parquet or Arrow file, or a save_to_disk folder."""
    return path.suffix.lower() in COLUMNAR_SUFFIXES or saved_dataset_folder(path) is not None


def columnar_reader_missing(files: dict[str, list[Path]], pyarrow: bool | None = None) -> str | None:
    """One line naming the first Parquet/Arrow input and the conversion when pyarrow is not installed (the
    processing image; `pyarrow`: whether it is, None to look), else None."""
    columnar = [path for paths in files.values() for path in paths if is_columnar(path)]
    installed = importlib.util.find_spec("pyarrow") is not None if pyarrow is None else pyarrow
    if not columnar or installed:
        return None
    return (
        f"{columnar[0]} is Parquet/Arrow data, which this container cannot read (no pyarrow): "
        f"{COLUMNAR_CONVERSION}, or {CONVERSION_HINT}"
    )


def flatten_squad_json(document: Any, file: str, problems: list[Problem]) -> Iterator[tuple[str, Any]]:
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


def _read_records(path: Path, display: str, problems: list[Problem], task: ModuleType) -> Iterator[tuple[str, Any]]:
    """(location, raw record) pairs from one file or saved-dataset folder; unreadable content becomes problems. A
    `.json` file is a document the task reads (its json_document_records: SQuAD v1.1 JSON), else JSON Lines (what
    `datasets`' to_json writes)."""
    if path.is_dir():
        yield from _saved_dataset_records(path, display, problems, task)
        return
    if path.stat().st_size == 0:
        problems.append(Problem.whole_file(display, "file is empty", "upload the complete file"))
        return
    suffix = path.suffix.lower()
    if path.name in SAVED_DATASET_METADATA and any(path.parent.glob("*.arrow")):
        problems.append(
            Problem.whole_file(
                display,
                "is the metadata of a datasets save_to_disk folder, not data",
                f"name the folder ({path.parent.name}/) in the manifest instead of the files in it",
            )
        )
    elif suffix == ".json" and hasattr(task, "json_document_records"):
        yield from _json_document_records(path, display, problems, task)
    elif suffix in (".json", ".jsonl", ".ndjson"):
        yield from _json_lines_records(path, display, problems)
    elif suffix in (".parquet", ".csv", ".arrow"):
        yield from _tabular_records(path, display, problems, task)
    else:
        problems.append(
            Problem.whole_file(
                display,
                f"unknown file type '{path.suffix}': accepted are {ACCEPTED_FORMATS}",
                CONVERSION_HINT,
            )
        )


def _json_document_records(
    path: Path, display: str, problems: list[Problem], task: ModuleType
) -> Iterator[tuple[str, Any]]:
    size = path.stat().st_size
    if size > MAX_JSON_FILE_BYTES:
        problems.append(
            Problem.whole_file(
                display,
                f"SQuAD JSON is parsed whole (about 6x its size in memory): {size / 2**20:.0f} MiB is over the "
                f"{MAX_JSON_FILE_BYTES // 2**20} MiB limit for one .json file",
                "split it into several files, or convert it to JSON Lines (read a line at a time): " + CONVERSION_HINT,
            )
        )
        return
    raw = path.read_bytes()
    if not raw.strip():
        problems.append(Problem.whole_file(display, "file is empty", "upload the complete file"))
        return
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        number = raw[: err.start].count(b"\n") + 1
        problems.append(Problem(display, f"line {number}", None, None, f"not UTF-8 ({err.reason})", "save as UTF-8"))
        return
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        problems.append(
            Problem(display, f"line {err.lineno}", None, None, f"invalid JSON: {err.msg}", "fix the JSON syntax")
        )
        return
    yield from task.json_document_records(document, display, problems)


def _json_lines_records(path: Path, display: str, problems: list[Problem]) -> Iterator[tuple[str, Any]]:
    """One record per line, read a line at a time: memory stays bounded whatever the file's size."""
    content = False
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                problems.append(
                    Problem(display, f"line {number}", None, None, f"not UTF-8 ({err.reason})", "save as UTF-8")
                )
                return
            if not line.strip():
                continue
            content = True
            try:
                yield f"line {number}", json.loads(line)
            except json.JSONDecodeError as err:
                yield f"line {number}", UnparsableLine(f"invalid JSON: {err.msg}")
    if not content:
        problems.append(Problem.whole_file(display, "file is empty", "upload the complete file"))


def _saved_dataset_records(
    path: Path, display: str, problems: list[Problem], task: ModuleType
) -> Iterator[tuple[str, Any]]:
    """A `Dataset.save_to_disk` folder: its Arrow files, in the order its state.json lists them."""
    state_path = path / SAVED_DATASET_STATE
    if not state_path.is_file():
        kind = "a DatasetDict folder: name each split's folder" if (path / "dataset_dict.json").is_file() else ""
        problems.append(
            Problem.whole_file(
                display,
                f"folder is not a datasets save_to_disk folder (no {SAVED_DATASET_STATE}){'; ' + kind if kind else ''}",
                f"list files in the manifest ({ACCEPTED_FORMATS}), or a Dataset.save_to_disk folder per split",
            )
        )
        return
    try:
        data_files = [entry["filename"] for entry in json.loads(state_path.read_text(encoding="utf-8"))["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        problems.append(
            Problem(display, SAVED_DATASET_STATE, None, None, f"unreadable: {err}", "save the dataset again")
        )
        return
    for filename in data_files:
        yield from _tabular_records(path / filename, f"{display}/{filename}", problems, task)


def _tabular_records(path: Path, display: str, problems: list[Problem], task: ModuleType) -> Iterator[tuple[str, Any]]:
    """Rows of a Parquet, CSV or Arrow (save_to_disk) file with the task's RECORD_COLUMNS, a batch at a time."""
    try:
        names, rows = _csv_rows(path, task.JSON_COLUMNS) if path.suffix.lower() == ".csv" else _columnar_rows(path)
    except Exception as err:  # pyarrow raises its own error types per format
        problems.append(
            Problem.whole_file(
                display,
                f"unreadable {path.suffix} file: {err}",
                f"write it again; or {CONVERSION_HINT}",
            )
        )
        return
    if not names:
        problems.append(Problem.whole_file(display, "file is empty", "upload the complete file"))
        return
    missing = [name for name in task.RECORD_COLUMNS if name not in names]
    if missing:
        problems.append(
            Problem(
                display,
                "",
                None,
                ",".join(missing),
                f"no column {', '.join(missing)} (has {', '.join(names)})",
                f"use the {task.NAME} columns {', '.join(task.RECORD_COLUMNS)}; or {CONVERSION_HINT}",
            )
        )
        return
    for row, record in enumerate(rows, start=1):
        yield f"row {row}", record


def _csv_rows(path: Path, json_columns: tuple[str, ...]) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """The header and the rows of a CSV file (every cell text, so ids like "001" stay strings; the task's
    `json_columns` parsed per cell), with the standard library only."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    handle = path.open(newline="", encoding="utf-8-sig")
    try:
        reader = csv.DictReader(handle)
        names = list(reader.fieldnames or [])
    except BaseException:
        handle.close()
        raise

    def rows() -> Iterator[dict[str, Any]]:
        with handle:
            for record in reader:
                yield {**record, **{name: _json_cell(record.get(name)) for name in json_columns if name in record}}

    return names, rows()


def _columnar_rows(path: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """The column names (of the first batch; none for an empty file) and the rows of a Parquet or Arrow file;
    pyarrow loads only here."""
    import pyarrow as pa

    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        batches = pq.ParquetFile(str(path)).iter_batches(batch_size=TABULAR_BATCH_ROWS)
    else:
        batches = iter(pa.ipc.open_stream(pa.memory_map(str(path))))
    first = next(batches, None)
    if first is None:
        return [], iter(())
    rows = (record for batch in _chain(first, batches) for record in batch.to_pylist())
    return list(first.schema.names), rows


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _json_cell(value: Any) -> Any:
    """A CSV cell holding a JSON object; left as it is (and reported by validation) when it is not one."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def validate_squad_record(record: Any, file: str, location: str) -> list[Problem]:
    """Every problem of one flattened SQuAD record (empty when the record is usable): question answering's
    validate_record."""
    if isinstance(record, UnparsableLine):
        return [Problem(file, location, None, None, record.message, "one JSON object per line", record_level=True)]
    if not isinstance(record, dict):
        return [Problem(file, location, None, None, "record is not a JSON object", "one object per record", True)]
    record_id = record.get("id")
    # A string or integer id names the record; any other value is not quoted (it may hold text).
    named = isinstance(record_id, str) or (isinstance(record_id, int) and not isinstance(record_id, bool))
    rid = str(record_id) if named else None

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
                problem(
                    f"answers.answer_start[{i}]",
                    f"must be an integer, got {type(start).__name__}",
                    "the answer's character offset in the context",
                )
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
            problems.append(_misplaced_answer(context, text, start, i, problem))
    return problems


def _misplaced_answer(
    context: str, text: str, start: int, index: int, problem: Callable[[str, str, str], Problem]
) -> Problem:
    """The problem of an answer that is not at its answer_start: where it does occur in the context (offsets, not
    text), which is the fix, or that it does not occur at all."""
    offsets: list[int] = []
    found = context.find(text)
    while found != -1 and len(offsets) <= MAX_SHOWN_OFFSETS:
        offsets.append(found)
        found = context.find(text, found + 1)
    what = f"the context at {start} is not answers.text[{index}] ({len(text)} characters)"
    if not offsets:
        return problem(
            f"answers.text[{index}]",
            f"{what}, which occurs nowhere in the context",
            "the answer must be a span of the context: fix the answer text or the context",
        )
    shown = ", ".join(str(offset) for offset in offsets[:MAX_SHOWN_OFFSETS])
    more = ", ..." if len(offsets) > MAX_SHOWN_OFFSETS else ""
    return problem(
        f"answers.answer_start[{index}]",
        f"{what}; it occurs at {shown}{more}",
        "set answer_start to the offset of the intended occurrence (characters, not bytes or tokens)",
    )


def saved_dataset_folder(path: Path) -> Path | None:
    """The `Dataset.save_to_disk` folder `path` is, or is a file of (its state.json beside it); else None."""
    for folder in (path, path.parent):
        if folder.is_dir() and (folder / SAVED_DATASET_STATE).is_file():
            return folder
    return None


def dataset_entries(paths: list[Path]) -> list[Path]:
    """What to read, in order: each file as it is, except that a save_to_disk folder, named itself or by any of
    its files (a manifest that lists every uploaded object names them all), is read once, as the folder."""
    entries: list[Path] = []
    for path in paths:
        entry = saved_dataset_folder(path) or path
        if entry not in entries:
            entries.append(entry)
    return entries


def split_entries(split_dir: Path) -> list[Path]:
    """The data of one split folder (for tools that build a manifest): files of the accepted formats and
    save_to_disk folders, sorted; a save_to_disk folder's own files are not listed one by one."""
    found = sorted(p for p in split_dir.rglob("*") if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
    return dataset_entries(found)


def given_id(record: Any) -> str | None:
    """The record's own id as a string (a string or an integer `id`), else None."""
    value = record.get("id") if isinstance(record, dict) else None
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return None


def default_task() -> ModuleType:
    """The task of a caller that names none: question answering, the pipeline's default."""
    from tasks import DEFAULT_TASK, task

    return task(DEFAULT_TASK)


def load_dataset_files(
    files: dict[str, list[Path]],
    root: Path,
    keep_records: bool = True,
    on_valid: Callable[[str, dict[str, Any]], None] | None = None,
    *,
    task: ModuleType | None = None,
    label_names: tuple[str, ...] | None = None,
) -> LoadReport:
    """Read and validate every file as records of `task` (a tasks module; default question answering) with the
    manifest's `label_names`; valid records are normalized by the task and kept in the report. With
    `keep_records=False` (validation only) they are counted, not kept: memory then stays bounded by one record (plus
    where each id was first seen: the duplicate check) for every streamed format. `on_valid(split, record)` sees each
    valid record, normalized, as it is read. A record without an id of its own (the tasks where ids are optional)
    is named by its file and location."""
    task = task or default_task()
    report = LoadReport()
    for split in SPLITS:
        for path in dataset_entries(files.get(split, [])):
            display = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            for location, record in _read_records(path, display, report.problems, task):
                problems = task.validate_record(record, display, location, label_names)
                record_id = given_id(record)
                if record_id is not None and record_id in report.sources:
                    problems.append(
                        Problem(
                            display,
                            location,
                            record_id,
                            "id",
                            f"duplicate id (first seen at {':'.join(report.sources[record_id])})",
                            "ids must be unique across all files",
                            record_level=True,
                        )
                    )
                elif record_id is not None:
                    report.sources[record_id] = (display, location)
                if problems:
                    report.problems.extend(problems)
                    report.invalid_records[split] += 1
                    continue
                report.valid_records[split] += 1
                if on_valid is None and not keep_records:
                    continue
                canonical = task.normalized(record, label_names, f"{display}:{location}")
                report.sources.setdefault(canonical["id"], (display, location))
                if on_valid is not None:
                    on_valid(split, canonical)
                if keep_records:
                    report.records[split].append(canonical)
    return report


def normalized_squad_record(record: dict[str, Any]) -> dict[str, Any]:
    """A valid SQuAD record in the flattened schema (COLUMNS), whatever file it came from: question answering's
    normalized."""
    return {
        "id": record["id"],
        "title": str(record.get("title") or ""),
        "context": record["context"],
        "question": record["question"],
        "answers": {
            "text": list(record["answers"]["text"]),
            "answer_start": list(record["answers"]["answer_start"]),
        },
    }


def entry_records(
    entry: Path, task: ModuleType | None = None, label_names: tuple[str, ...] | None = None
) -> Iterator[dict[str, Any]]:
    """The normalized records of one entry (a file, or a save_to_disk folder) that validated as `task`'s, streamed;
    raises ValueError naming the first problem if it does not."""
    task = task or default_task()
    problems: list[Problem] = []
    for location, record in _read_records(entry, entry.name, problems, task):
        problems += task.validate_record(record, entry.name, location, label_names)
        if problems:
            break
        yield task.normalized(record, label_names, f"{entry.name}:{location}")
    if problems:
        raise ValueError(f"{entry} is not a valid dataset file: {problems[0]}")


def convert_columnar(
    dataset_dir: Path,
    files: list[tuple[Path, str]],
    workdir: Path,
    task: ModuleType | None = None,
    label_names: tuple[str, ...] | None = None,
) -> tuple[list[tuple[Path, str]], dict[str, dict[str, str]]]:
    """Replace each validated Parquet/Arrow file and save_to_disk folder by a JSON Lines file of its records
    (`<split>/<name>.jsonl` beside where it was; inside a split folder that is itself a save_to_disk folder, as
    DatasetDict.save_to_disk writes them), written under `workdir`: the processing image reads JSON
    Lines, JSON and CSV with the standard library, and has no pyarrow. Returns the files to upload and, per
    converted key, what it was converted from ({"key", "format"}), for the manifest. Runs where the dataset is
    uploaded from (the upload tool, the local runner), never on the image; ValueError if a converted file would
    replace one the dataset has."""
    kept: list[tuple[Path, str]] = []
    converted: dict[str, dict[str, str]] = {}
    done: set[Path] = set()
    for path, key in files:
        entry = saved_dataset_folder(path) or path
        if not is_columnar(path):
            kept.append((path, key))
        elif entry not in done:
            done.add(entry)
            kept.append(convert_entry(dataset_dir, entry, workdir, converted, task, label_names))
    keys = [key for _, key in kept]
    twice = next((key for key in converted if keys.count(key) > 1), None)
    if twice is not None:
        raise ValueError(
            f"{converted[twice]['key']} converts to {twice}, which the dataset already has: rename one of them"
        )
    return kept, converted


def convert_entry(
    dataset_dir: Path,
    entry: Path,
    workdir: Path,
    converted: dict[str, dict[str, str]],
    task: ModuleType | None = None,
    label_names: tuple[str, ...] | None = None,
) -> tuple[Path, str]:
    """Write one Parquet/Arrow file or save_to_disk folder's records as `workdir/<its key>.jsonl`; record the
    source in `converted`; (the JSON Lines file, its key)."""
    source = entry.relative_to(dataset_dir).as_posix()
    stem = source.removesuffix(entry.suffix) if entry.is_file() else source
    # A manifest key's first segment names its split (qa.outputs.manifest_key_split): a DatasetDict.save_to_disk
    # folder's split folders (train/, validation/) are save_to_disk folders themselves, whose JSON Lines
    # copy stays in the split folder rather than going beside it, to the dataset root.
    key = f"{stem}.jsonl" if manifest_key_split(f"{stem}.jsonl") else f"{stem}/{stem}.jsonl"
    target = workdir / key
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for record in entry_records(entry, task, label_names):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    fmt = "save_to_disk" if entry.is_dir() else entry.suffix.lower().lstrip(".")
    converted[key] = {"key": source, "format": fmt}
    print(f"converted {source} ({fmt}) to JSON Lines: {key}")
    return target, key
