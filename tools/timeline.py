"""The timeline picture of `make estimate PLOT=<png>`: where the minutes of a run go, start-up vs compute."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.estimate import Pipeline

COLOURS = {"start-up": "#e08a3c", "work": "#3c78b4"}


def plot_timeline(path: Path, runs: list[tuple[str, Pipeline]]) -> None:
    """One panel per (label, run), one bar per step along the critical path (start-up and work in their own
    colours), the x axis in minutes from the manifest upload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [len(p.steps) for _, p in runs]
    figure, axes = plt.subplots(
        len(runs), 1, figsize=(11, 1.2 + 0.32 * sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    for axis, (label, run) in zip(axes, runs, strict=True):
        clock = 0.0
        names = []
        for row, step in enumerate(run.steps):
            axis.barh(row, step.startup / 60, left=clock / 60, color=COLOURS["start-up"], height=0.6)
            axis.barh(row, step.work / 60, left=(clock + step.startup) / 60, color=COLOURS["work"], height=0.6)
            clock += step.seconds
            names.append(step.name)
        job = run.job
        axis.set_yticks(range(len(names)), names, fontsize=8)
        axis.invert_yaxis()
        axis.set_xlim(0, max(clock / 60 * 1.02, 1))
        axis.grid(axis="x", alpha=0.3)
        axis.set_title(
            f"{label}: {job.instance_count} x {job.instance_type}, {clock / 60:.1f} min, "
            f"${run.on_demand_usd:,.2f} on demand ({run.cold_starts} instance cold start(s))",
            fontsize=9,
            loc="left",
        )
    axes[-1].set_xlabel("minutes (modelled: make estimate, config/costs.py)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in COLOURS.values()]
    axes[0].legend(handles, ["start-up, waits, I/O", "compute"], loc="upper right", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)
