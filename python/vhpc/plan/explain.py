"""`vhpc plan --explain`: the ranking as a table, then what was not ranked and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from vhpc.plan.rank import Ranking


def summary(r: Ranking) -> str:
    """One line: the winner and its prediction."""
    w = r.winner
    pred = ("did not finish within plan.limit_s" if w.makespan_ns is None
            else f"predicted makespan {w.makespan_ns / 1e9:.4g} s")
    tied = sum(1 for x in r.ranked if x.tied) - 1
    ties = (f" ({tied} more tied within {r.jobs.plan.tolerance_pct:g} %; this is the simplest)"
            if tied > 0 else "")
    return (f"{r.host.name} ({r.host.platform}, {r.topology.describe()}): best of "
            f"{len(r.ranked)} candidates is {w.candidate.label} with {len(w.candidate.vms)} VM(s), "
            f"{pred}{ties}")


def print_ranking(r: Ranking, console: Console) -> None:
    done = [x.makespan_ns for x in r.ranked if x.makespan_ns is not None]
    best = min(done) if done else None
    table = Table(title=f"ranking by predicted makespan ({r.jobs.plan.seeds} seed(s) each, "
                        f"{r.simulations} simulations in {r.wall_s:.1f} s)", title_justify="left")
    for name, justify in [("#", "right"), ("candidate", "left"), ("VMs", "right"),
                          ("makespan s", "right"), ("vs fastest", "right")]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for job in r.jobs.jobs:
        table.add_column(f"{job.name} s", justify="right")
    for place, item in enumerate(r.ranked, 1):
        span = item.makespan_ns
        table.add_row(f"{place}{'=' if item.tied else ''}", item.candidate.label, str(len(item.candidate.vms)),
                      "unfinished" if span is None else f"{span / 1e9:.4g}",
                      "—" if span is None or not best else f"{100 * (span / best - 1):+.1f} %",
                      *("unfinished" if v is None else f"{v / 1e9:.4g}" for v in item.jobs_ns.values()))
    console.print(table)
    console.print(f"=: tied, within {r.jobs.plan.tolerance_pct:g} % (plan.tolerance_pct) of the fastest "
                  "makespan and of the least summed job time; listed in enumeration order (fewer VMs, "
                  "pinned vCPUs, packed ranks first), the first wins", highlight=False)
    for c in r.infeasible:
        console.print(f"not feasible: {c.label}: {c.infeasible}", highlight=False)
    for what in r.omitted:
        console.print(f"[yellow]not modelled by this simulator build:[/yellow] {what}", highlight=False)
