"""The run report of one pipeline execution (`make report`, tools/report.py; the end of every local run).

A self-contained HTML file (the figure inline as a PNG, no external files or scripts) and the same
figure as a PNG beside it: loss and learning-rate curves, throughput, the pipeline timeline (each step's
start, duration, status, attempts), the evaluation metrics against the F1 threshold, the cost at list price,
the registered package and the run's lineage (dataset manifest, version, base model). The same report for a
local run and an AWS execution: both are a RunRecord (record.py).
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa.outputs import LOG_LEARNING_RATE, LOG_LOSS, LOG_SAMPLES_PER_SECOND, LOG_STEP

from config.costs import PRICE_REGION, PRICES_AS_OF
from pipeline_steps import names
from reporting.record import GATE_MARK, REPORT_FILE, REPORT_IMAGE, RunRecord, metrics_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STATUS_COLOURS = {"Succeeded": "#2e7d32", "Failed": "#c62828", "Executing": "#1565c0", "Stopped": "#757575"}
FAILURE_WIDTH = 150  # characters of a failure's reason in the figure's title
NO_HISTORY = "no log history in the model archive\n(qa/outputs.py LOG_HISTORY_FILE)"


def _training_entries(record: RunRecord, key: str) -> tuple[list[float], list[float]]:
    points = [(e[LOG_STEP], e[key]) for e in record.log_history if e.get(key) is not None and LOG_STEP in e]
    return [float(s) for s, _ in points], [float(v) for _, v in points]


def _empty(axis: Any, title: str, text: str) -> None:
    axis.set_title(title, loc="left", fontsize=10)
    axis.text(0.5, 0.5, text, ha="center", va="center", color="#757575", fontsize=9, transform=axis.transAxes)
    axis.set_xticks([])
    axis.set_yticks([])


def _plot_history(axis: Any, record: RunRecord, key: str, title: str, colour: str, ylabel: str) -> list[float]:
    """One log-history series against the optimizer step, styled like every curve of the report; its values
    (none: the panel says there is no history)."""
    steps, values = _training_entries(record, key)
    if not steps:
        _empty(axis, title, NO_HISTORY)
        return []
    axis.set_title(title, loc="left", fontsize=10)
    axis.plot(steps, values, color=colour, marker="o", markersize=2, linewidth=1.2, label=key)
    axis.set_xlabel("optimizer step", fontsize=8)
    axis.set_ylabel(ylabel, color=colour, fontsize=8)
    axis.tick_params(labelsize=7)
    axis.grid(alpha=0.3)
    return values


def _plot_curves(axis: Any, record: RunRecord) -> None:
    if not _plot_history(axis, record, LOG_LOSS, "Training loss and learning rate", "#1565c0", "loss"):
        return
    lr_steps, rates = _training_entries(record, LOG_LEARNING_RATE)
    if lr_steps:
        twin = axis.twinx()
        twin.plot(lr_steps, rates, color="#ef6c00", linewidth=1.0, linestyle="--", label="learning rate")
        twin.set_ylabel("learning rate", color="#ef6c00", fontsize=8)
        twin.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        twin.tick_params(labelsize=7)


def _plot_throughput(axis: Any, record: RunRecord) -> None:
    rates = _plot_history(axis, record, LOG_SAMPLES_PER_SECOND, "Throughput (all ranks)", "#6a1b9a", "samples / s")
    if rates:
        axis.set_ylim(0, max(rates) * 1.15)


def _plot_timeline(axis: Any, record: RunRecord) -> None:
    timed = [s for s in record.steps if s.started_at]
    if not timed:
        _empty(axis, "Pipeline timeline", "no step has started")
        return
    axis.set_title("Pipeline timeline", loc="left", fontsize=10)
    origin = min(datetime.fromisoformat(s.started_at or "") for s in timed)
    total = max((datetime.fromisoformat(s.started_at or "") - origin).total_seconds() + (s.seconds or 0) for s in timed)
    for row, step in enumerate(reversed(timed)):
        start = (datetime.fromisoformat(step.started_at or "") - origin).total_seconds()
        width = max(step.seconds or 0.0, total / 300)  # conditions take no time: still a visible tick
        axis.barh(row, width, left=start, color=STATUS_COLOURS.get(step.status, "#9e9e9e"), height=0.6)
        label = f"{step.seconds or 0:.0f} s" + (f", {step.attempts} attempts" if step.attempts > 1 else "")
        axis.text(start + width + total / 100, row, label, va="center", fontsize=7)
    axis.set_yticks(range(len(timed)), [s.name for s in reversed(timed)], fontsize=7)
    axis.set_xlim(0, total * 1.4 or 1)  # room for the labels right of the last bars
    axis.set_xlabel("seconds since the first step started", fontsize=8)
    axis.tick_params(axis="x", labelsize=7)
    axis.grid(axis="x", alpha=0.3)


def _plot_metrics(axis: Any, record: RunRecord) -> None:
    if not record.metrics:
        _empty(axis, "Evaluation (validation set)", "no evaluation metrics")
        return
    axis.set_title("Evaluation (validation set)", loc="left", fontsize=10)
    names = list(record.metrics)  # the task's METRICS order
    values = [record.metrics[n] for n in names]
    threshold = record.f1_threshold
    colours = [
        "#2e7d32" if threshold is None or n != record.gate_metric or v >= threshold else "#c62828"
        for n, v in zip(names, values, strict=True)
    ]
    labels = [n + GATE_MARK if n == record.gate_metric else n for n in names]
    bars = axis.bar(labels, values, color=colours, width=0.5)
    for bar, value in zip(bars, values, strict=True):
        axis.text(bar.get_x() + bar.get_width() / 2, value + 1, f"{value:.1f}", ha="center", fontsize=8)
    if threshold is not None:
        axis.axhline(threshold, color="#c62828", linestyle="--", linewidth=1)
        # Right of the plot, at the line's end: clear of the score ticks on the left and of the bars.
        axis.annotate(
            f"F1 threshold\n{threshold:g} ({record.gate_metric})",
            xy=(1, threshold),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=7,
            color="#c62828",
        )
    axis.set_ylim(0, 105)
    axis.set_ylabel("score (0-100)", fontsize=8)
    axis.tick_params(labelsize=8)


def failure_line(record: RunRecord) -> str:
    """Why a run failed, on one line: the failing step and its reason ("" unless it failed)."""
    if record.status != "Failed":
        return ""
    step = next((s for s in record.steps if s.status == "Failed"), None)
    reason = " ".join(((step.detail if step else "") or record.failure or "no reason recorded").split())
    if len(reason) > FAILURE_WIDTH:
        reason = reason[: FAILURE_WIDTH - 3] + "..."
    return f"{step.name if step else 'execution'} failed: {reason}"


def _headline(record: RunRecord) -> str:
    cost = record.list_price_usd
    package = (
        f"registered {record.model_package_arn} ({record.approval_status})"
        if record.model_package_arn
        else "no model registered"
    )
    cost_text = f"${cost:,.2f} at list price" if cost is not None else "no list price"
    failure = failure_line(record)
    return f"{record.execution_id} ({record.source}): {record.status}; {cost_text}; {package}" + (
        f"; {failure}" if failure else ""
    )


def draw(record: RunRecord) -> Figure:
    """The report's figure: curves, throughput, timeline and metrics, with a headline (and, for a failed run,
    the failing step and why); the caller closes it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(2, 2, figsize=(12, 7.5), dpi=100)
    package = record.model_package_arn.rsplit("/", 2)[-2:] if record.model_package_arn else None
    registered = f"registered {'/'.join(package)} ({record.approval_status})" if package else "no model registered"
    cost = record.list_price_usd
    failure = failure_line(record)
    figure.suptitle(
        f"{record.pipeline_name} {record.execution_id} ({record.source}): {record.status}"
        f"   |   {_number(cost, '${:,.2f}')} at list price   |   {registered}" + (f"\n{failure}" if failure else ""),
        fontsize=10,
        x=0.01,
        y=0.995,
        ha="left",
        va="top",
        color=STATUS_COLOURS["Failed"] if failure else "black",
    )
    _plot_curves(axes[0][0], record)
    _plot_throughput(axes[0][1], record)
    _plot_timeline(axes[1][0], record)
    _plot_metrics(axes[1][1], record)
    figure.tight_layout(rect=(0, 0, 1, 0.94 if failure else 0.97))
    return figure


def render_png(record: RunRecord) -> bytes:
    """The report's figure as a PNG."""
    from matplotlib import pyplot

    figure = draw(record)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    pyplot.close(figure)
    return buffer.getvalue()


def _number(value: float | None, template: str) -> str:
    return "-" if value is None else template.format(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(record: RunRecord, png: bytes) -> str:
    """A self-contained HTML page: the figure inline (data: URI) and the tables behind it."""
    steps = [
        [s.name, s.type, s.status, s.started_at or "-", _number(s.seconds, "{:.1f}"), str(s.attempts), s.detail]
        for s in record.steps
    ]
    jobs = [
        [
            j.step,
            f"{j.instance_count} x {j.instance_type}",
            "spot" if j.spot else "on-demand",
            f"{j.billable_seconds:.0f}",
            _number(j.list_price_usd, "${:,.4f}"),
        ]
        for j in record.jobs
    ]
    lineage = [
        ["dataset manifest", record.parameters.get(names.MANIFEST_KEY, "-")],
        ["manifest version", record.parameters.get(names.MANIFEST_VERSION_ID, "-")],
        ["base model", record.parameters.get(names.BASE_MODEL_URI, "-")],
        ["model archive", record.model_data or "-"],
        ["model package", f"{record.model_package_arn or '-'} ({record.approval_status or '-'})"],
        ["execution", record.execution_arn],
    ]
    metrics = metrics_text(record.metrics, record.task)
    cost = record.list_price_usd
    price_note = (
        f"on-demand LIST prices ({PRICE_REGION}, as of {PRICES_AS_OF}, config/costs.py); a local run's jobs are"
        " priced by their wall time here on the instances the definition names"
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Run report {html.escape(record.execution_id)}</title><style>"
        "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}th{background:#f3f3f3}"
        "img{max-width:100%}</style></head><body>",
        f"<h1>Run report: {html.escape(record.pipeline_name)}</h1>",
        f"<p><b>{html.escape(_headline(record))}</b></p>",
        f"<p>task: {html.escape(record.task)}; metrics: {html.escape(metrics)}; F1 threshold (on "
        f"{html.escape(record.gate_metric)}): {record.f1_threshold}; failure: "
        f"{html.escape(record.failure or '-')}</p>",
        f"<img alt='run report figure' src='data:image/png;base64,{base64.b64encode(png).decode()}'>",
        "<h2>Steps</h2>",
        _table(["step", "type", "status", "started (UTC)", "seconds", "attempts", "detail"], steps),
        "<h2>Jobs and cost</h2>",
        _table(["step", "instances", "purchase", "billed seconds", "list price"], jobs),
        f"<p>total: {_number(cost, '${:,.4f}')} at {html.escape(price_note)}</p>",
        "<h2>Lineage</h2>",
        _table(["", ""], lineage),
        "<h2>Parameters</h2>",
        _table(["parameter", "value"], [[k, v] for k, v in sorted(record.parameters.items())]),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(record: RunRecord, folder: Path) -> Path:
    """REPORT_FILE and REPORT_IMAGE into `folder`; the HTML file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    png = render_png(record)
    (folder / REPORT_IMAGE).write_bytes(png)
    path = folder / REPORT_FILE
    path.write_text(render_html(record, png), encoding="utf-8")
    return path


def report_line(path: Path) -> str:
    """What a person is told after write_report: where the report and its figure are."""
    return f"run report: {path} (figure: {path.with_name(REPORT_IMAGE)})"
