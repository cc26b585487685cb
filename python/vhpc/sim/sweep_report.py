"""A sweep's results at a glance: the summary table and `vhpc report` on a sweep directory.

Both show one metric (a column of sweep_store.METRICS) against one axis (`x`)
and optionally a second (`hue`: one line or table column per value), as the
mean over every other axis and the seeds. The figure draws the mean with its
95 % confidence interval (Student's t over the points averaged) and, when the
other axes take at most MAX_PANELS combinations, one panel per combination
instead of averaging over them. Defaults come from the sweep file's `[report]`.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhpc.sim import sweep_store
from vhpc.sim.run import SimError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
    from rich.table import Table

DEFAULT_METRIC = "useful_share"
MAX_PANELS = 12
#: Metrics a plot or table can show: the numeric ones.
NUMERIC = [f.name for f in sweep_store.METRICS if f.name not in ("jobs", "finished")]


def choose(out: Path, metric: str | None, x: str | None = None,
           hue: str | None = None) -> tuple[str, str, str | None, list[str]]:
    """(metric, x, hue, the other axes) from the options and the sweep's defaults;
    SimError naming the option if one is not a metric or an axis of this sweep."""
    man = sweep_store.manifest(out)
    defaults = man.get("report", {})
    axes = [a for a in man["axes"] if a != "seed"]
    metric = check_metric(metric or defaults.get("metric") or DEFAULT_METRIC)
    x = x or defaults.get("x") or axes[0]
    hue = hue or defaults.get("hue") or next((a for a in axes if a != x), None)
    for opt, axis in (("--x", x), ("--hue", hue)):
        if axis is not None and axis not in man["axes"]:
            raise SimError(f"{opt} {axis}: not an axis of this sweep; its axes: {', '.join(man['axes'])}")
    if hue == x:
        raise SimError(f"--hue {hue}: the same axis as --x")
    others = [a for a in axes if a not in (x, hue)]
    return metric, x, hue, others


def check_metric(metric: str) -> str:
    """`metric` if the rows have it as a number, else SimError listing those that do."""
    if metric not in NUMERIC:
        raise SimError(f"--metric {metric}: not a metric of a sweep; one of {', '.join(NUMERIC)}")
    return metric


def mean_ci(values: "pd.Series") -> tuple[float, float]:
    """The mean and the half-width of its 95 % confidence interval (0 for one value)."""
    from scipy import stats

    v = values.dropna()
    if len(v) < 2:
        return (float(v.mean()) if len(v) else math.nan), 0.0
    return float(v.mean()), float(stats.sem(v) * stats.t.ppf(0.975, len(v) - 1))


def pivot(df: "pd.DataFrame", metric: str, x: str, hue: str | None) -> "pd.DataFrame":
    """Mean of `metric` with x as rows and hue values as columns."""
    return df.pivot_table(index=x, columns=hue, values=metric, aggfunc="mean") if hue \
        else df.groupby(x)[[metric]].mean()


def summary_table(out: Path, metric: str | None = None) -> "Table":
    """The rich summary table `vhpc sim sweep` prints at the end."""
    from rich.table import Table

    metric, x, hue, others = choose(out, metric)
    df = sweep_store.read(out)
    p = pivot(df, metric, x, hue)
    over = ", ".join([*others, "seed"])
    table = Table(title=f"{metric}: mean over {over} ({len(df)} points)", title_justify="left")
    table.add_column(f"{x} \\ {hue}" if hue else x, justify="right")
    for col in p.columns:
        table.add_column(str(col) if hue else metric, justify="right")
    for idx, row in p.iterrows():
        table.add_row(str(idx), *(f"{v:.4g}" for v in row))
    return table


def markdown_table(df: "pd.DataFrame", metric: str, x: str, hue: str | None) -> list[str]:
    p = pivot(df, metric, x, hue)
    head = [f"{x} \\ {hue}" if hue else x, *([str(c) for c in p.columns] if hue else [metric])]
    lines = ["| " + " | ".join(head) + " |", "|" + " --: |" * len(head)]
    lines += ["| " + " | ".join([str(i), *(f"{v:.4g}" for v in row)]) + " |"
              for i, row in p.iterrows()]
    return lines


def panels(df: "pd.DataFrame", others: list[str]) -> list[tuple[dict[str, Any], "pd.DataFrame"]]:
    """One (title values, rows) per combination of the other axes, or one of every
    row when there are more than MAX_PANELS combinations (then averaged over)."""
    values = [sorted(df[a].unique()) for a in others]
    if not others or math.prod(len(v) for v in values) > MAX_PANELS:
        return [({}, df)]
    out = []
    for combo in itertools.product(*values):
        sel = df
        for a, v in zip(others, combo):
            sel = sel[sel[a] == v]
        out.append((dict(zip(others, combo)), sel))
    return out


def figure(df: "pd.DataFrame", metric: str, x: str, hue: str | None,
           others: list[str]) -> "Figure":
    """Mean ± 95 % CI of `metric` against `x`, a line per `hue` value, a panel per
    combination of the other axes (house style of vhpc.lab's figures)."""
    from matplotlib.figure import Figure

    groups = panels(df, others)
    cols = min(len(groups), 3)
    rows = math.ceil(len(groups) / cols)
    fig = Figure(figsize=(max(5.0 * cols, 7.0), 3.8 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    numeric_x = df[x].dtype.kind in "iuf"
    for ax, (title, sel) in zip(axes, groups):
        for i, (key, line) in enumerate(sel.groupby(hue, sort=True) if hue else [(None, sel)]):
            stats = [(v, *mean_ci(g[metric])) for v, g in line.groupby(x, sort=True)]
            xs = [s[0] for s in stats] if numeric_x else [str(s[0]) for s in stats]
            ax.errorbar(xs, [s[1] for s in stats], yerr=[s[2] for s in stats], marker="o",
                        capsize=3, color=f"C{i}", label=None if hue is None else f"{hue} = {key}")
        ax.set_xlabel(x)
        ax.set_ylabel(metric)
        ax.set_title(" · ".join(f"{k} = {v}" for k, v in title.items()) or
                     (f"mean over {', '.join(others)}" if others else ""))
        ax.grid(True, alpha=0.3)
        if hue is not None:
            ax.legend(fontsize="small")
    fig.suptitle(f"{df['sweep'].iloc[0]}: {metric} vs {x} (mean with 95 % CI over seeds"
                 f"{' and averaged axes' if len(groups) == 1 and others else ''})")
    return fig


def write(out: Path, report_dir: Path | None = None, metric: str | None = None,
          x: str | None = None, hue: str | None = None) -> Path:
    """The figure (PNG, SVG) and `report.md` of the sweep in `out`; the report's path."""
    metric, x, hue, others = choose(out, metric, x, hue)
    df = sweep_store.read(out)
    man = sweep_store.manifest(out)
    report_dir = Path(report_dir) if report_dir is not None else Path(out) / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{metric}-by-{x}" + (f"-{hue}" if hue else "")
    fig = figure(df, metric, x, hue, others)
    fig.savefig(report_dir / f"{stem}.png", dpi=120)
    fig.savefig(report_dir / f"{stem}.svg")
    revs = sorted({f"{r}{' (dirty)' if d else ''}" for r, d in zip(df.git_revision, df.git_dirty)})
    lines = [f"# vhpc report: sweep {man['sweep']}", "",
             f"![{metric} vs {x}]({stem}.png)", "", f"Vector version: [{stem}.svg]({stem}.svg).", "",
             f"## {metric}: mean over {', '.join([*others, 'seed'])}", "",
             *markdown_table(df, metric, x, hue), "",
             "## Provenance", "",
             f"- sweep file: `{man['file']}` (sweep {man['sweep_sha']})",
             f"- points: {len(df)} stored of {man['points']}; axes: {', '.join(man['axes'])}",
             f"- simulated on: {', '.join(sorted({w.rsplit(':', 1)[0] for w in df.worker}))}; "
             f"simulation time per point: median {df.sim_wall_s.median():.3g} s, "
             f"total {df.sim_wall_s.sum():.1f} s",
             f"- vhpc {', '.join(sorted(set(df.vhpc_version)))}, git revisions: "
             f"{', '.join(f'`{r}`' for r in revs)}", ""]
    path = report_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
