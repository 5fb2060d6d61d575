"""Reading the step table that a local run prints at its end (local_runner.__main__.print_summary)."""

from __future__ import annotations

import re


def table(out: str) -> list[tuple[str, str]]:
    """(step, status) rows of the summary tables printed by the run."""
    rows = re.findall(r"^(\S+)\s+(?:Lambda|Condition|Processing|Training|RegisterModel|Fail)\s+(\S+)\s", out, re.M)
    return [(name, status) for name, status in rows]
