"""The plan directory: the winner's VMs as libvirt XML and xl files, the ranking as JSON.

`write_plan` writes, for the winning candidate, DIR/<vm>.xml (libvirt.py) and
DIR/<vm>.cfg (xl.py) for every VM, DIR/scenario.toml (the winner's simulator
scenario: `vhpc sim run DIR/scenario.toml` shows its prediction) and
DIR/plan.json (`ranking_records`: every candidate, its prediction, or why it was
not feasible). Files of an earlier plan for VMs this plan does not have are
left alone; the JSON names the VMs of this one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomli_w

from vhpc.plan import libvirt, xl
from vhpc.plan.inputs import PlanError
from vhpc.plan.rank import Ranking


def ranking_records(r: Ranking) -> dict[str, Any]:
    done = [x.makespan_ns for x in r.ranked if x.makespan_ns is not None]
    best = min(done) if done else None
    rows = []
    for place, item in enumerate(r.ranked, 1):
        c = item.candidate
        rows.append({
            "rank": place, "candidate": c.label, "partitioning": c.partitioning,
            "channel": c.channel, "pinning": c.pinning, "placement": c.placement,
            "vnuma": c.vnuma, "vms": len(c.vms),
            "makespan_s": None if item.makespan_ns is None else item.makespan_ns / 1e9,
            "tied": item.tied,
            "vs_fastest": (None if item.makespan_ns is None or not best
                        else item.makespan_ns / best - 1),
            "jobs_s": {k: None if v is None else v / 1e9 for k, v in item.jobs_ns.items()},
        })
    return {
        "host": r.host.name, "platform": r.host.platform, "topology": r.topology.describe(),
        "seeds": r.jobs.plan.seeds, "tolerance_pct": r.jobs.plan.tolerance_pct, "simulations": r.simulations, "wall_s": round(r.wall_s, 3),
        "simulator_features": r.features, "not_modelled": r.omitted,
        "winner": rows[0]["candidate"],
        "vms": [vm.name for vm in r.winner.candidate.vms],
        "ranking": rows,
        "infeasible": [{"candidate": c.label, "why": c.infeasible} for c in r.infeasible],
    }


def write_plan(r: Ranking, out: str | Path) -> list[Path]:
    """Write the winner's files under `out` (created); the paths written."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanError(f"{out}: cannot create the plan directory: {exc.strerror or exc}") from None
    win = r.winner
    cand = win.candidate
    predicted = ("did not finish" if win.makespan_ns is None
                 else f"predicted makespan {win.makespan_ns / 1e9:.3f} s")
    note = (f"vhpc plan: {cand.label}, {predicted}; host {r.host.name} "
            f"({r.host.platform}, {r.topology.describe()})")
    written = []
    files: list[tuple[Path, str]] = []
    for vm in cand.vms:
        files.append((out / f"{vm.name}.xml",
                      libvirt.to_xml(libvirt.domain(r.host, r.topology, r.jobs, cand, vm, note))))
        files.append((out / f"{vm.name}.cfg",
                      xl.write(xl.VmConfig.of(vm, r.topology, r.jobs), note)))
    files.append((out / "scenario.toml", f"# {note}\n" + tomli_w.dumps(win.scenario)))
    files.append((out / "plan.json", json.dumps(ranking_records(r), indent=1) + "\n"))
    for path, text in files:
        try:
            path.write_text(text)
        except OSError as exc:
            raise PlanError(f"{path}: cannot write: {exc.strerror or exc}") from None
        written.append(path)
    return written
