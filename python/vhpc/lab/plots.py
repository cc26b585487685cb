"""Figures from a results dataset (the long DataFrame of `vhpc.lab.store.read`).

Each public function takes that DataFrame and returns a matplotlib Figure, or
None when the data it needs is absent (the report then says so instead of
drawing an empty plot). Means and 95 % intervals come from `vhpc.lab.stats`.
Figures are built with `matplotlib.figure.Figure`, not pyplot: no global state,
no display needed, nothing to close.
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from vhpc.lab import stats

#: `lat_<size>_us`, `bw_<size>_MBps`, `bibw_<size>_MBps` (the pingpong parser's names).
SIZE_METRIC = re.compile(r"^(lat|bw|bibw)_(\d+)_(us|MBps)$")
KIND_TITLES = {"lat": "latency", "bw": "bandwidth", "bibw": "bidirectional bandwidth"}
#: Above this max/min ratio of plotted values a linear axis hides the small ones.
LOG_SPAN = 30.0


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df.status == "ok") & (df.metric != "")]


def summarize(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean, CI bounds and n of `value` for each group of `keys` (ok rows only)."""
    out = []
    for key, g in ok_rows(df).groupby(keys, sort=True):
        s = stats.summarize(list(g.value))
        out.append({**dict(zip(keys, key)), "mean": s.mean, "ci_low": s.ci_low,
                    "ci_high": s.ci_high, "n": s.n, "unit": g.unit.iloc[0]})
    return pd.DataFrame(out, columns=[*keys, "mean", "ci_low", "ci_high", "n", "unit"])


def yerr(s: pd.DataFrame) -> list[list[float]]:
    """Asymmetric error bars; none (0) where n = 1 gives no interval."""
    lo = (s["mean"] - s.ci_low).fillna(0.0)
    hi = (s.ci_high - s["mean"]).fillna(0.0)
    return [list(lo), list(hi)]


def label(row, dims: list[str]) -> str:
    return " · ".join(str(row[d]) for d in dims) or "all runs"


def varying(df: pd.DataFrame, dims: list[str]) -> list[str]:
    """The dimensions that take more than one value: the rest need not be in labels."""
    return [d for d in dims if df[d].nunique() > 1]


def grid(n: int, width: float = 5.0, height: float = 3.8) -> tuple[Figure, list]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    # At least 7 in wide: room for the title above a single panel.
    fig = Figure(figsize=(max(width * cols, 7.0), height * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, list(axes[:n])


def wide_range(values) -> bool:
    v = [x for x in values if x > 0 and math.isfinite(x)]
    return len(v) == len(list(values)) and bool(v) and max(v) / min(v) > LOG_SPAN


def log_y(ax) -> None:
    """Log y axis with plain tick labels (`6`, `2000`, not `6×10⁰`)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def unit_text(unit: str) -> str:
    return f" [{unit}]" if unit else ""


# --- 1. latency and bandwidth vs message size -------------------------------------

def size_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Ok rows of size metrics, with `kind` (lat/bw/bibw) and `size` (bytes) columns."""
    ok = ok_rows(df)
    parts = ok.metric.str.extract(SIZE_METRIC)
    ok = ok[parts[0].notna()].copy()
    ok["kind"] = parts.loc[ok.index, 0]
    ok["size"] = parts.loc[ok.index, 1].astype(int)
    return ok


def size_kinds(df: pd.DataFrame) -> list[str]:
    """Kinds measured at two or more sizes: one size makes no curve."""
    rows = size_rows(df)
    return [k for k in KIND_TITLES if rows[rows.kind == k]["size"].nunique() >= 2]


def latency_bandwidth(df: pd.DataFrame) -> Figure | None:
    """Log-log mean ± 95 % CI vs message size, one line per mpi·workload·config·policy."""
    kinds = size_kinds(df)
    if not kinds:
        return None
    rows = size_rows(df)
    dims = ["mpi", "workload", "config", "policy"]
    fig, axes = grid(len(kinds), width=6.0, height=4.5)
    for ax, kind in zip(axes, kinds):
        s = summarize(rows[rows.kind == kind], [*dims, "size"])
        shown = varying(s, dims)
        for key, line in s.groupby(dims, sort=True):
            ax.errorbar(line["size"], line["mean"], yerr=yerr(line), marker="o",
                        capsize=3, label=label(dict(zip(dims, key)), shown))
        ax.set_xscale("log", base=2)
        log_y(ax)
        ax.set_xlabel("message size [B]")
        ax.set_ylabel(f"{KIND_TITLES[kind]}{unit_text(s.unit.iloc[0])}")
        ax.set_title(f"{KIND_TITLES[kind]} vs message size")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("Message size sweep: mean with 95 % CI")
    return fig


# --- 2. bars per configuration × policy --------------------------------------------

PER_JOB = re.compile(r"\.job\d+$")


def time_metrics(df: pd.DataFrame) -> list[str]:
    """Execution times: `time`, or any metric in seconds, but not the per-job
    `<m>.job<j>` of concurrent jobs (their mean `<m>` and `<m>.sd_jobs` stand for them)."""
    ok = ok_rows(df)
    names = set(ok[(ok.metric == "time") | (ok.unit == "s")].metric)
    return sorted(m for m in names if not PER_JOB.search(m))


def single_size_metrics(df: pd.DataFrame) -> list[str]:
    """Size metrics of kinds measured at one size only (no curve: shown as bars)."""
    rows = size_rows(df)
    return sorted(set(rows[~rows.kind.isin(size_kinds(df))].metric))


def bars(df: pd.DataFrame, metrics: list[str], title: str) -> Figure | None:
    """Mean ± 95 % CI per config (groups) and policy (colours); a panel per metric, workload, MPI."""
    s = summarize(df[df.metric.isin(metrics)], ["metric", "workload", "mpi", "config", "policy"])
    if s.empty:
        return None
    panels = list(s.groupby(["metric", "workload", "mpi"], sort=True))
    policies = sorted(set(s.policy))
    fig, axes = grid(len(panels))
    for ax, ((metric, workload, mpi_name), p) in zip(axes, panels):
        configs = sorted(set(p.config))
        width = 0.8 / len(policies)
        for i, policy in enumerate(policies):
            b = p[p.policy == policy].set_index("config").reindex(configs).dropna(subset=["mean"])
            xs = [configs.index(c) + (i - (len(policies) - 1) / 2) * width for c in b.index]
            ax.bar(xs, b["mean"], width, yerr=yerr(b), capsize=3, label=policy,
                   color=f"C{i}")
        ax.set_xticks(range(len(configs)), configs, rotation=20, ha="right")
        if wide_range(p["mean"]):
            log_y(ax)  # e.g. µs natively, tens of ms time-sliced
        ax.set_xlabel("configuration")
        ax.set_ylabel(f"{metric}{unit_text(p.unit.iloc[0])}")
        ax.set_title(f"{workload} · {mpi_name}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(title="policy", fontsize="small")
    fig.suptitle(f"{title}: mean with 95 % CI")
    return fig


def execution_time(df: pd.DataFrame) -> Figure | None:
    return bars(df, time_metrics(df), "Execution time")


def single_size(df: pd.DataFrame) -> Figure | None:
    return bars(df, single_size_metrics(df), "Single message size")


# --- 3. pressure curve: a metric vs a numeric config attribute ---------------------

#: The last number in a config name, and the name without it: `d2-noise` → (`d-noise`, 2).
NUMBERED = re.compile(r"^(.*?)[-_]?(\d+)(\D*)$")


def family(config_name: str) -> str:
    return NUMBERED.sub(r"\1\3", config_name) or "config"


def config_level(config_name: str, cell_json: str) -> tuple[str, float] | None:
    """(family, level) of a config: its `domains` or `domain` field (a count or a
    list) when the stored cell has one, else the last number in its name (`d3`,
    `d3-noise`); configs alike but for that number are one family."""
    try:
        config = json.loads(cell_json).get("config", {})
        domains = config.get("domains", config.get("domain"))  # a count, or `[[config.domain]]`
    except (ValueError, AttributeError):
        domains = None
    if isinstance(domains, (list, tuple)):
        domains = len(domains)
    if isinstance(domains, (int, float)) and not isinstance(domains, bool):
        return family(config_name), float(domains)
    m = NUMBERED.match(config_name)
    return (family(config_name), float(m.group(2))) if m else None


def pressure_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Ok rows of configs with a level, in families with two or more levels."""
    ok = ok_rows(df)
    levels = {(c, j): config_level(c, j) for c, j in set(zip(ok.config, ok.cell))}
    ok = ok[[levels[(c, j)] is not None for c, j in zip(ok.config, ok.cell)]].copy()
    ok["family"] = [levels[(c, j)][0] for c, j in zip(ok.config, ok.cell)]
    ok["level"] = [levels[(c, j)][1] for c, j in zip(ok.config, ok.cell)]
    spread = ok.groupby("family")["level"].nunique()
    return ok[ok.family.isin(spread[spread >= 2].index)]


def pressure(df: pd.DataFrame) -> Figure | None:
    """Mean ± 95 % CI vs the config level, a line per policy (and family); a panel per
    metric (times if any, else every metric), workload and MPI."""
    rows = pressure_rows(df)
    if rows.empty:
        return None
    times = time_metrics(rows)
    if times:
        rows = rows[rows.metric.isin(times)]
    s = summarize(rows, ["metric", "workload", "mpi", "family", "policy", "level"])
    panels = list(s.groupby(["metric", "workload", "mpi"], sort=True))
    fig, axes = grid(len(panels))
    for ax, ((metric, workload, mpi_name), p) in zip(axes, panels):
        shown = varying(p, ["family", "policy"])
        for key, line in p.groupby(["family", "policy"], sort=True):
            ax.errorbar(line["level"], line["mean"], yerr=yerr(line), marker="o", capsize=3,
                        label=label(dict(zip(["family", "policy"], key)), shown))
        ax.set_xticks(sorted(set(p["level"])))
        ax.set_xlabel(f"{' / '.join(sorted(set(p.family)))} (configuration level)")
        ax.set_ylabel(f"{metric}{unit_text(p.unit.iloc[0])}")
        ax.set_title(f"{workload} · {mpi_name}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("Pressure curve: mean with 95 % CI")
    return fig
