"""The timeline picture of `make estimate PLOT=<png>`: where the minutes of a run go, start-up vs compute."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tools.estimate import Pipeline

COLOURS = {"start-up": "#e08a3c", "work": "#3c78b4"}
SEED_LABEL = "seed article"  # tools/estimate.py's label of the seed article's runs (SEED_RUNS)


def seed_caption() -> str:
    """What the seed article's panels are: the published runs this project is measured against."""
    from tools.estimate import SEED_RUNS

    published = "; ".join(
        f"{count} x {name}: about {minutes / 60:.0f} h, ${usd:.0f}"
        if minutes >= 60
        else f"{count} x {name}: {minutes:.0f} min, ${usd:.0f}"
        for name, count, minutes, usd in SEED_RUNS
    )
    return (
        f"{SEED_LABEL}: the blog post this project started from (BERT-large wwm on SQuAD v1.1, fp16, batch 4 per "
        "GPU, padded to 384, 2 epochs, one Hugging Face training job that downloads, tokenizes in one process "
        f"(run_qa.py), trains and evaluates; it reports {published}), modelled here with the same cost model as "
        "this pipeline. bench/RESULTS.md section 7 compares the model with the article's figures."
    )


def draw_timeline(runs: list[tuple[str, Pipeline]]) -> Figure:
    """One panel per (label, run), one bar per step along the critical path (start-up and work in their own
    colours), every panel on one x axis in minutes from the manifest upload, so the runs compare by length; a
    caption says what the seed article's runs are when they are shown. The caller closes the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [len(p.steps) for _, p in runs]
    caption = seed_caption() if any(label == SEED_LABEL for label, _ in runs) else ""
    caption_inches = 0.6 if caption else 0.0
    figure, axes = plt.subplots(
        len(runs),
        1,
        figsize=(11, 1.2 + 0.32 * sum(heights) + caption_inches),
        gridspec_kw={"height_ratios": heights},
        sharex=True,
    )
    longest = max(run.seconds for _, run in runs) / 60
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
        axis.axvline(clock / 60, color="#555555", linewidth=0.8, linestyle=":")  # where this run ends
        axis.grid(axis="x", alpha=0.3)
        axis.tick_params(axis="x", labelbottom=True, labelsize=8)
        axis.set_title(
            f"{label}: {job.instance_count} x {job.instance_type}, {clock / 60:.1f} min, "
            f"${run.on_demand_usd:,.2f} on demand ({run.cold_starts} instance cold start(s))",
            fontsize=9,
            loc="left",
        )
    axes[0].set_xlim(0, max(longest * 1.02, 1))
    axes[-1].set_xlabel(
        "minutes from the manifest upload, one scale for every panel (modelled: make estimate, config/costs.py)"
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in COLOURS.values()]
    axes[0].legend(handles, ["start-up, waits, I/O", "compute"], loc="lower right", fontsize=8)
    if caption:
        text = textwrap.fill(caption, 160).replace("$", r"\$")  # a literal dollar, not matplotlib's mathtext
        figure.text(0.01, 0.005, text, fontsize=8, va="bottom", ha="left", color="#333333")
    figure.tight_layout(rect=(0, caption_inches / figure.get_figheight(), 1, 1))
    return figure


def plot_timeline(path: Path, runs: list[tuple[str, Pipeline]]) -> None:
    """The timeline of `runs` (draw_timeline) as a PNG at `path`."""
    import matplotlib.pyplot as plt

    figure = draw_timeline(runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)
