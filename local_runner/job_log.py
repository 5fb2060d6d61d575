"""A local job's output: every line in the job's own log file, the console spared the libraries' reports.

On SageMaker a job's stdout and stderr both land in its CloudWatch log stream; locally they land in
`<job folder>/job.log`. The console shows stdout as it comes and stderr without progress-bar redraws and
without transformers' weight-loading report (a table of UNEXPECTED/MISSING keys that reads like a failure
but is expected when a base encoder gets a new question-answering head; the training job says so itself).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

Printer = Callable[[str], None]
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
# tqdm's elapsed-time field: "[00:01<00:02, ...]" with a known total, "[00:01, ...]" without one.
PROGRESS_BAR = re.compile(r"\[(\d+:)?\d+:\d\d[<,]")


class LibraryNoiseFilter:
    """Decides, line by line, whether a stderr line is a library's progress bar or load report."""

    def __init__(self) -> None:
        self._in_report = False
        self._in_notes = False

    def is_noise(self, line: str) -> bool:
        plain = ANSI_ESCAPE.sub("", line).rstrip()
        # First: another process's unfinished progress bar may share the report's first line.
        if " LOAD REPORT from: " in plain:
            self._in_report, self._in_notes = True, False
            return True
        if PROGRESS_BAR.search(plain):
            return True
        if self._in_report:
            # The report: a table, a blank line, "Notes:", then one "- STATUS ..." line per kind of key.
            if plain == "Notes:":
                self._in_notes = True
                return True
            if not self._in_notes or plain.startswith("- "):
                return True
            self._in_report = False
        return False


class JobLog:
    """Writes a job's lines to its log file (thread-safe) and echoes them to the console as they come."""

    def __init__(self, path: Path, out: Printer, err: Printer) -> None:
        self.path, self.out, self.err = path, out, err
        self.hidden = 0
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8")

    def _write(self, line: str) -> None:
        with self._lock:
            self._file.write(line if line.endswith("\n") else line + "\n")
            self._file.flush()

    def stdout_line(self, line: str) -> None:
        self._write(line)
        self.out(f"    | {line.rstrip()}")

    def follow_stderr(self, stream: IO[str]) -> None:
        """Read stderr to its end: log every line, echo the ones that are not library noise."""
        noise = LibraryNoiseFilter()
        for line in stream:
            self._write(line)
            if noise.is_noise(line):
                self.hidden += 1
            else:
                self.err(f"    | {line.rstrip()}")

    def close(self) -> None:
        self._file.close()
        if self.hidden:
            lines = "1 library line" if self.hidden == 1 else f"{self.hidden} library lines"
            self.out(f"    full job log ({lines} not shown above): {self.path}")
