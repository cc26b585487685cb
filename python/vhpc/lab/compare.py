"""`vhpc lab compare`: per metric and cell, mean ± 95 % CI, ratio to a baseline
configuration or policy (Fieller CI), Welch's t-test p, over the stored ok runs."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from rich.table import Table

from vhpc.lab import LabError, stats, store

KEYS = ["mpi", "workload", "metric", "config", "policy"]
HEADERS = ("MPI", "workload", "metric", "config", "policy", "n", "mean [95 % CI]",
           "ratio to baseline [95 % CI]", "Welch p")
#: With a host profile: the simulator's prediction and its ratio to the median.
PREDICTED = ("predicted", "predicted / median")


def rows(results_dir: Path, metric: str | None = None, baseline: str | None = None,
         on_damaged=None) -> list[dict]:
    """One dict per (mpi, workload, metric, config, policy), in a stable order."""
    df = store.read(results_dir, on_damaged)
    require_ok(df, results_dir)
    failed = df[df.status != "ok"].groupby(KEYS[:2] + KEYS[3:]).run_key.nunique()
    ok = df[(df.status == "ok") & (df.metric != "")]
    if metric is not None:
        if metric not in set(ok.metric):
            raise LabError(f"{results_dir}: no metric {metric!r}; stored: "
                           f"{', '.join(sorted(set(ok.metric)))}")
        ok = ok[ok.metric == metric]
    dim = baseline_dimension(df, baseline, results_dir)
    samples = {key: list(g.value) for key, g in ok.groupby(KEYS, sort=True)}
    out = []
    for key, values in samples.items():
        row = dict(zip(KEYS, key))
        s = stats.summarize(values)
        row.update(n=s.n, mean=s.mean, ci_low=s.ci_low, ci_high=s.ci_high,
                   median=statistics.median(values),
                   unit=ok[ok.metric == row["metric"]].unit.iloc[0],
                   failed=int(failed.get((row["mpi"], row["workload"], row["config"],
                                          row["policy"]), 0)),
                   ratio=math.nan, ratio_low=math.nan, ratio_high=math.nan, p=math.nan)
        if dim is not None and row[dim] != baseline:
            base = samples.get(tuple(baseline if k == dim else row[k] for k in KEYS))
            if base:
                r = stats.ratio(values, base)
                row.update(ratio=r.ratio, ratio_low=r.ci_low, ratio_high=r.ci_high,
                           p=stats.welch_p(values, base))
        out.append(row)
    return out


def require_ok(df, results_dir: Path) -> None:
    """LabError unless some stored run succeeded with a metric: nothing to compare or draw."""
    if df.empty:
        raise LabError(f"{results_dir}: no stored runs (expected run-*.parquet from "
                       "`vhpc lab run`)")
    if ((df.status == "ok") & (df.metric != "")).any():
        return
    runs = df.drop_duplicates("run_key").status.value_counts()
    counts = ", ".join(f"{n} {status}" for status, n in sorted(runs.items()))
    raise LabError(f"{results_dir}: no successful run among the {int(runs.sum())} stored "
                   f"({counts}): nothing to compare")


def baseline_dimension(df, baseline: str | None, where: Path) -> str | None:
    """Whether the baseline names a config or a policy."""
    if baseline is None:
        return None
    for dim in ("config", "policy"):
        if baseline in set(df[dim]):
            return dim
    raise LabError(f"{where}: baseline {baseline!r} is neither a config "
                   f"({', '.join(sorted(set(df.config)))}) nor a policy "
                   f"({', '.join(sorted(set(df.policy)))})")


def add_predictions(data: list[dict], predictions) -> None:
    """Put each row's predicted value (vhpc.lab.predict.Prediction, matched by MPI,
    workload, metric, config and policy) beside it, as `predicted`."""
    # In a profile with two host states a cell has a prediction per state: the
    # state most of its runs were made in stands for it (sorted last, kept).
    by_key = {(p.cell.mpi, p.cell.workload.name, p.metric, p.cell.config.name, p.cell.policy):
              p.predicted for p in sorted(predictions, key=lambda p: p.runs)
              if p.predicted is not None}
    for row in data:
        row["predicted"] = by_key.get(tuple(row[k] for k in KEYS), math.nan)


def headers(data: list[dict]) -> tuple[str, ...]:
    return HEADERS + (PREDICTED if any("predicted" in r for r in data) else ())


def num(v: float) -> str:
    if math.isnan(v):
        return "—"
    return f"{v:.4g}"


def cells_of(row: dict) -> tuple[str, ...]:
    ci = f" [{num(row['ci_low'])}, {num(row['ci_high'])}]" if row["n"] > 1 else ""
    ratio = "" if math.isnan(row["ratio"]) else (
        f"{num(row['ratio'])} [{num(row['ratio_low'])}, {num(row['ratio_high'])}]")
    n = f"{row['n']}" + (f" (+{row['failed']} failed)" if row["failed"] else "")
    unit = f" {row['unit']}" if row["unit"] else ""
    cells = (row["mpi"], row["workload"], row["metric"], row["config"], row["policy"], n,
             f"{num(row['mean'])}{unit}{ci}", ratio,
             "" if math.isnan(row["p"]) else f"{row['p']:.2g}")
    if "predicted" not in row:
        return cells
    predicted = row["predicted"]
    return cells + (num(predicted), num(predicted / row["median"]) if row["median"] else "—")


def caption(baseline: str | None, profile: str | None = None) -> str:
    base = (f"ratio = mean / mean of the same cell with {baseline!r} (Fieller 95 % CI); "
            "Welch p against it" if baseline else "no baseline given (--baseline)")
    pred = (f"; predicted = `vhpc lab predict` on the host profile {profile}, ratio to the "
            "median of the ok runs" if profile else "")
    return f"mean with Student-t 95 % CI over ok runs; {base}{pred}"


def rich_table(data: list[dict], baseline: str | None, title: str,
               profile: str | None = None) -> Table:
    table = Table(title=title, caption=caption(baseline, profile))
    for h in headers(data):
        table.add_column(h, justify="right" if h in ("n", "Welch p", *PREDICTED) else "left")
    for row in data:
        table.add_row(*cells_of(row))
    return table


def markdown(data: list[dict], baseline: str | None, title: str,
             profile: str | None = None) -> str:
    cols = headers(data)
    lines = [f"# {title}", "", caption(baseline, profile), "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells_of(r)) + " |" for r in data]
    return "\n".join(lines) + "\n"
