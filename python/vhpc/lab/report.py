"""`vhpc report`: the figures of `vhpc.lab.plots` as PNG and SVG, and `report.md`
embedding them with the `vhpc lab compare` table and the runs' provenance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from vhpc.lab import LabError, compare, plots, predict, store

#: (file stem, section title, builder, why it can be missing): the report's figures in order.
FIGURES: list[tuple[str, str, Callable, str]] = [
    ("size-sweep", "Latency and bandwidth vs message size", plots.latency_bandwidth,
     "no `lat_<size>_us` / `bw_<size>_MBps` / `bibw_<size>_MBps` metric measured at "
     "two or more message sizes"),
    ("single-size", "Single-size latency and bandwidth", plots.single_size,
     "no latency or bandwidth metric measured at a single message size"),
    ("execution-time", "Execution time", plots.execution_time,
     "no `time` metric and no metric in seconds"),
    ("pressure", "Pressure curve", plots.pressure,
     "no configurations with a numeric level (a `domains` field, or names like "
     "`domains-1` … `domains-4`) at two or more levels"),
]


def load(results_dir: Path, on_damaged=None) -> pd.DataFrame:
    """The stored runs, or LabError (exit 2) when none succeeded to report on."""
    if not Path(results_dir).is_dir():
        raise LabError(f"{results_dir}: no such results directory")
    damaged: list[str] = []

    def note(path: Path, why: str) -> None:
        damaged.append(f"{path.name} ({why})")
        if on_damaged is not None:
            on_damaged(path, why)

    df = store.read(results_dir, note)
    compare.require_ok(df, results_dir)
    df.attrs["damaged"] = damaged
    return df


def save(fig, out: Path, stem: str) -> list[Path]:
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
    return paths


def figures_section(df: pd.DataFrame, out: Path) -> tuple[list[str], list[Path]]:
    """Markdown for every figure (or the note saying why it is absent) and the files written."""
    lines, written = ["## Figures", ""], []
    for stem, title, build, missing in FIGURES:
        fig = build(df)
        lines += [f"### {title}", ""]
        if fig is None:
            for stale in (out / f"{stem}.png", out / f"{stem}.svg"):  # from an earlier report
                stale.unlink(missing_ok=True)
            lines += [f"Not drawn: {missing}.", ""]
            continue
        files = save(fig, out, stem)
        written += files
        lines += [f"![{title}]({files[0].name})", "",
                  f"Vector version: [{files[1].name}]({files[1].name}).", ""]
    return lines, written


def table_section(results_dir: Path, baseline: str | None) -> list[str]:
    """compare.py's Markdown table, its heading demoted under the report's."""
    text = compare.markdown(compare.rows(results_dir, None, baseline), baseline, "Statistics")
    return ["#" + text.rstrip("\n"), ""]


def values(series: pd.Series) -> str:
    return ", ".join(f"`{v}`" for v in sorted(set(series.dropna().astype(str))) if v) or "—"


def provenance_section(df: pd.DataFrame) -> list[str]:
    """Where, when and with what the runs were made, and how many did not finish ok."""
    runs = df.drop_duplicates("run_key")
    counts = runs.status.value_counts()
    revs = sorted({f"{r}{' (dirty)' if d else ''}" for r, d in zip(runs.git_revision, runs.git_dirty)})
    mpis = sorted({f"{m}: {v}" for m, v in zip(runs.mpi, runs.mpi_version)})
    lines = ["## Provenance", "",
             f"- experiments: {values(runs.experiment)}",
             f"- runs: {len(runs)} ({counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed, "
             f"{counts.get('timeout', 0)} timed out, {counts.get('invalid', 0)} invalid)",
             f"- started: {runs.started_at.min()} … {runs.started_at.max()}",
             f"- hosts: {values(runs.host)}",
             f"- CPU: {values(runs.cpu_model)}",
             f"- kernels: {values(runs.kernel)}",
             f"- MPI versions: {', '.join(f'`{m}`' for m in mpis)}",
             f"- git revisions: {', '.join(f'`{r}`' for r in revs)}"]
    bad = runs[runs.status != "ok"]
    for (status, message), g in bad.groupby(["status", "message"], sort=True):
        lines.append(f"- {len(g)} × {status}: {message.strip().splitlines()[0] if message.strip() else '(no message)'}")
    lines += [f"- damaged file skipped: {d}" for d in df.attrs.get("damaged", [])]
    return lines + [""]


def predicted_section(profile: str, predictions: list) -> list[str]:
    """`vhpc lab predict`'s table for these results, its heading demoted."""
    text = predict.markdown(predictions, f"Predicted on the host profile {profile}")
    within = [p for p in predictions if predict.within(p) is not None]
    hits = sum(bool(predict.within(p)) for p in within)
    return ["#" + text.rstrip("\n"), "",
            f"{hits} of {len(within)} predicted cells within ±20 % of the median.", ""]


def write(results_dir: Path, out: Path | None = None, baseline: str | None = None,
          on_damaged=None, predicted: tuple[str, list] | None = None) -> Path:
    """Write the figures and `report.md` into `out` (default RESULTS_DIR/report); its
    path. `predicted`: (profile name, vhpc.lab.predict predictions) for a section."""
    df = load(results_dir, on_damaged)
    out = Path(out) if out is not None else Path(results_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    table = table_section(results_dir, baseline)  # before drawing: a bad baseline fails fast
    figures, _ = figures_section(df, out)
    pred = predicted_section(*predicted) if predicted else []
    lines = [f"# vhpc report: {results_dir}", "", *figures, *table, *pred,
             *provenance_section(df)]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
