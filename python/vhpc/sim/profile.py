"""From a host profile's measurements to simulator parameters.

`vhpc calibrate` writes raw microbenchmark figures (docs/calibrate.md); this
module is the one place that turns them into scenario fields, so that a
simulation of this host uses this host's costs. Nothing here looks at a lab
experiment's results: every parameter comes from a microbenchmark, by a rule
written below next to the figure it reads.

- Messages (`[mpi.shm]`): the own-core ping-pong latency of the MPI at small
  sizes is one message's whole cost (the sender's copy in, the time to be seen,
  the receiver's copy out); it is split evenly into send, visibility and
  receive (the split matters only when a rank is descheduled mid-message).
  Where the curve bends at the MPI's switch to its rendezvous (two lines over
  1–256 KiB fit it far better than one: `protocol_switch`), `mpi.eager_limit` is
  the largest size before the bend, the eager per-KiB cost the lower line's
  slope (half to each side), and the upper line's intercept less two small
  messages (the handshake) the receiver's setup per rendezvous (`rndv_ns`);
  with no clean bend (Open MPI's TCP over the bridge, some runs), the slope over
  1–16 KiB and the simulator's eager limit. Rendezvous data (`rndv_*_ns_per_kib`) move at the
  measured streaming bandwidth (`bw`, 1 MiB messages): the receiver, which
  copies, sets that pace; what the bidirectional figure (`bibw`) costs beyond
  it is the sender's share (shared memory's single copy: nearly nothing; TCP:
  nearly as much again); each less its share of the per-chunk costs. For ranks
  that send data they have just computed (`fresh`: the NPB-like kernels), the
  receiver's rendezvous rate adds what the 1 MiB `fresh` ping-pong (the sender
  writes its buffer before each send) took beyond `lat` at 1 MiB, per KiB: the
  lines then come from the sender's cache, not from the receiver's own. An
  8-byte exchange (`exch`: both ranks MPI_Sendrecv at once) slower than one way
  gives the sender's work after a message has left (`post_send_ns`: the exchange
  less the send and receive thirds, from each probe's best run), which a
  ping-pong hides while the reply travels.
- Channels between the lab's network-namespace domains (`vhpc calibrate --only
  channels`, `measured.mpi.<mpi>.bridge` and `.netns_shm`): the same rule as
  `[mpi.shm]` on the ping-pong between two namespaces, over TCP through the
  bridge (`[mpi.bridge]`, the channel of a `nic = "bridge"` domain) and
  through shared memory (`[mpi.ivshmem]`, the channel of domains sharing an
  ivshmem group). `lab_channel` maps the lab's `channel` onto domain and
  `[mpi]` fields: "net" puts every domain on `nic = "bridge"` with transports
  `sm, net`; "shm" puts them in one ivshmem group, transports `sm, ivshmem, net`.
  Every pair of ranks then talks over that one channel (a rank per domain, or the
  MPI forced onto it), so `mpi.local_send_limit` comes from the local-send figures
  measured over that channel (the rule below), not over the MPI's own shared memory.
- Context switch (`hypervisor.vcpu_switch_ns`): one hop of the yield floor (two
  processes on one CPU passing a turn with `sched_yield`), less one poll.
- Linux (`hypervisor.linux`): the tick is 1 / CONFIG_HZ; the base slice is
  the kernel's default (3 ms), or the measured slice between two busy loops
  when that is shorter.
- The lab's slicer (`hypervisor.slicer`): a switch at a slice's end costs the
  median gap of a forced switch. With the slicer's own log of its switches
  (`idle_switch`: from deciding to the next domain thawed, in the blocked
  probe), the native slicer's watchers are simulated (`watchers`): leaving an
  idle domain costs `idle_switch`, and a watcher's look is what remains of a
  blocked hop between domains of one task each after that and a wake-up, plus,
  for each more task a domain holds (its ranks' threads, `threads_per_rank`),
  what one more task added to the hop (`blocked_switch_3_tasks`: domains of
  three tasks, the watchers read each one); the poll is the
  driver's fallback (`measured.slicer.poll_us`), and the idle round the
  slicer's constants. A profile measured before that figure existed gets the
  older rule: a poll grid twice the time to notice an idle domain (the hop less
  the forced switch and a wake-up), at least MIN_SLICER_POLL_US, and the forced
  switch's cost for every switch.
- When a send completes (`mpi.local_send_limit`): the smaller of the largest
  MPI_Send and the largest MPI_Isend that complete while the receiver stays
  outside MPI (`local_send_max`, `local_isend_max`, bench/send_local), when that
  is below the simulator's eager limit (64 KiB): larger eager sends then
  complete only at the receiver's fin, as they do in the MPI. The simulator has
  one limit for every send, so it takes the call that needs the receiver
  sooner. A profile without these figures (calibrated before they existed, or
  whose probe failed) gets no field: the simulator's default, every eager send
  local; `vhpc calibrate --only local-send --out PROFILE` adds them.
- libvhpc_wait's adaptive (`mpi.adaptive_*`): its documented defaults (spin
  50 µs, or 2 µs when time-shared waits outlast that; sleeps from 1 µs
  doubling to 1 ms), each sleep lasting its request plus what a 1 µs
  `nanosleep` with 1 µs timer slack takes here beyond 1 µs; that part is the
  timer's and the wake-up's work, so the simulated rank spends it on its CPU.

A scenario names a profile with `host.profile` (and `host.mpi`); `resolve`
puts the profile's parameters under the scenario's own before the native core
sees it.
"""

from __future__ import annotations

import copy
import math
import statistics
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from vhpc import paths
from vhpc.host import profile as host_profile

#: libvhpc_wait's defaults (runtime/wait.c, docs/runtime.md): what `adaptive` does
#: when timeshared.
SPIN_US = 50
SPIN_MIN_US = 2
SLEEP_MIN_US = 1
SLEEP_MAX_US = 1000
#: The kernel's default EEVDF base slice (sched_base_slice, Linux 6.6+).
BASE_SLICE_US = 3000
#: Cost of one poll of the MPI's progress engine (an MPI_Test that finds nothing).
POLL_NS = 20
#: The simulator's default eager limit (`mpi.eager_limit`, MPICH2's 64 KiB), kept
#: for a channel whose curve has no clean protocol switch; a local-send limit at
#: or above the eager limit changes nothing and is left out.
EAGER_LIMIT = 65536
#: The local-send figures of `[measured.mpi.<mpi>]`, one per call bench/send_local probes.
LOCAL_SEND_FIGURES = ("local_send_max", "local_isend_max")
#: The simulated slicer's finest poll: its watchers notice an idle domain within
#: tens of µs; a finer grid would change nothing measurable and cost events.
MIN_SLICER_POLL_US = 10
TASKS_PROBED = host_profile.SLICER_TASKS
#: Two lines fit a latency curve with a protocol switch (sum of squared relative
#: errors over 1-256 KiB, on the lower envelope) within KNEE_FIT, and KNEE_GAIN times
#: better than one line does. On the profiles here shared memory's fit within
#: 0.001-0.06, at least 10 times better than a line; TCP's over the bridge (window
#: and acknowledgement effects) within 0.03-0.10 and 5-150 times better (MPICH's UCX
#: switching at 16 KiB), or not within 0.1 (Open MPI's in some runs).
KNEE_FIT = 0.1
KNEE_GAIN = 4
#: A channel whose 1 MiB streams both ways at once cost the sender less than this
#: share of the receiver's per-KiB time moves its large messages with one copy by
#: the receiver (CMA, xpmem: `rndv_pull`), so its sender need not run meanwhile.
#: Shared memory between two CPUs here: 0-14 %; TCP, whose sender copies into the
#: socket: 37-74 %.
PULL_SHARE = 0.25
#: A profile's channels stream rendezvous data in chunks of the simulator's default
#: size, WINDOW of them unacknowledged: deep enough that the acks, one latency
#: back, never hold a stream below its measured bandwidth.
CHUNK_BYTES = 32 * 1024
WINDOW = 4
#: The message size of the `fresh` probe (calibrate's BW_SIZE), whose `lat` it is
#: compared with.
FRESH_BYTES = 1 << 20


class ProfileMismatch(ValueError):
    """The profile lacks a figure a parameter needs; names the key."""


def figure(profile: Mapping[str, Any], dotted: str) -> Any:
    node: Any = profile
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ProfileMismatch(f"the profile has no {dotted}")
        node = node[part]
    if isinstance(node, Mapping) and "skipped" in node:
        raise ProfileMismatch(f"the profile's {dotted} was not measured: {node['skipped']}")
    return node


def median(profile: Mapping[str, Any], dotted: str) -> float:
    return float(figure(profile, dotted)["median"])


def series(profile: Mapping[str, Any], dotted: str, stat: str = "median") -> dict[float, float]:
    fig = figure(profile, dotted)
    return dict(zip(fig["x"], fig[stat]))


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(slope per KiB, intercept) of latency over size."""
    fit = statistics.linear_regression([x / 1024 for x, _ in points], [y for _, y in points])
    return fit.slope, fit.intercept


def _misfit(points: list[tuple[float, float]], line: tuple[float, float]) -> float:
    """Sum of squared relative errors of `line` over `points`."""
    slope, intercept = line
    return sum((intercept + slope * x / 1024 - y) ** 2 / y ** 2 for x, y in points)


def lower_envelope(lat: Mapping[float, float]) -> dict[float, float]:
    """Each size's latency, at most that of any larger size."""
    out, least = {}, math.inf
    for x in sorted(lat, reverse=True):
        least = min(least, lat[x])
        out[x] = least
    return out


def protocol_switch(lat: Mapping[float, float]) -> tuple[int, float, float] | None:
    """Where the MPI switches from eager to rendezvous on this curve: (the largest
    eager size, the eager line's slope, the rendezvous line's intercept). The two
    lines over sizes 1 KiB-256 KiB (beyond, the caches' capacity bends every curve)
    that fit it best must fit within KNEE_FIT and KNEE_GAIN times better than one
    line; else None (no clean switch). The curve is taken as its lower envelope
    (each size at most what any larger size took): a bump where a larger message
    went faster than a smaller one (TCP's 4 KiB here, from Nagle and delayed
    acknowledgements) is a transport artefact no pair of lines expresses, and one
    such point alone would hide the switch."""
    pts = sorted((x, v) for x, v in lower_envelope(lat).items() if 1024 <= x <= 256 * 1024)
    if len(pts) < 4:
        return None
    best = None
    for k in range(1, len(pts) - 2):
        eager, rndv = pts[:k + 1], pts[k + 1:]
        lines = (_line(eager), _line(rndv))
        err = _misfit(eager, lines[0]) + _misfit(rndv, lines[1])
        if best is None or err < best[0]:
            best = (err, int(pts[k][0]), lines[0][0], lines[1][1])
    one = _misfit(pts, _line(pts))
    if best[0] > KNEE_FIT or one < KNEE_GAIN * best[0] or one < KNEE_FIT:
        return None
    return best[1:]


def shm_channel(profile: Mapping[str, Any], mpi: str, section: str = "shm",
                fresh: bool = False) -> dict[str, int]:
    """A channel's costs from `measured.mpi.<mpi>.<section>`: its ping-pong latencies
    (small sizes, the eager slope, the rendezvous setup) and its streaming bandwidth
    (the rendezvous rate); with `fresh`, for data the sender has just written
    (`fresh_data`)."""
    lat = series(profile, f"measured.mpi.{mpi}.{section}.lat")
    small = statistics.median(v for x, v in lat.items() if x <= 64)
    switch = protocol_switch(lat)
    if switch:
        per_kib = switch[1]
    else:
        mid = sorted((x, v) for x, v in lat.items() if 1024 <= x <= 16384)
        per_kib = _line(mid)[0] if len(mid) >= 2 else 0.0
    third = round(small / 3)
    channel = {
        "latency_ns": third,
        "send_ns": third,
        "recv_ns": third,
        "send_ns_per_kib": round(max(per_kib, 0.0) / 2),
        "recv_ns_per_kib": round(max(per_kib, 0.0) / 2),
    }
    if switch:  # what the rendezvous line has beyond its handshake's two messages
        channel["rndv_ns"] = max(round(switch[2] - 2 * small), 0)
    try:
        channel.update(post_send(profile, mpi, section))
    except ProfileMismatch:  # measured before the exchange probe existed
        pass
    try:
        one_way = 1024e3 / median(profile, f"measured.mpi.{mpi}.{section}.bw")
        both_ways = 2 * 1024e3 / median(profile, f"measured.mpi.{mpi}.{section}.bibw")
    except ProfileMismatch:
        return channel
    # A stream moves at its slower side's pace (`bw`: the receiver's, which copies);
    # streams both ways at once each pay both sides' copies on every CPU (`bibw`):
    # shared memory's single copy leaves the sender almost nothing, TCP halves it.
    recv_kib = one_way
    send_kib = min(max(both_ways - one_way, 0.0), one_way)
    # A chunk's pace includes its per-chunk costs (the receiver's; the sender's and
    # the ack it takes back), so the copies' rates are what the bandwidth leaves.
    chunk_kib = CHUNK_BYTES / 1024
    channel.update(chunk_bytes=CHUNK_BYTES, window=WINDOW,
                   rndv_recv_ns_per_kib=round(max(recv_kib - third / chunk_kib, 0.0)),
                   rndv_send_ns_per_kib=round(max(send_kib - 2 * third / chunk_kib, 0.0)))
    if send_kib < PULL_SHARE * recv_kib:  # single copy: the receiver reads the sender's buffer
        channel["rndv_pull"] = True
    if fresh:
        channel["rndv_recv_ns_per_kib"] += fresh_data(profile, mpi, section)
    return channel


def fresh_data(profile: Mapping[str, Any], mpi: str, section: str) -> int:
    """What a KiB of rendezvous data costs more when the sender has just written it
    than the ping-pong's buffer, which stays in both CPUs' caches: the 1 MiB `fresh`
    ping-pong (bench/pingpong: every line written before each send) less `lat` at
    1 MiB, per KiB; 0 when the profile lacks the figure. Charged to the receiver's
    rendezvous copy, which fetches the lines from the sender's cache (under single
    copy; the sender's next write takes them back, inside the same difference)."""
    try:
        fresh = median(profile, f"measured.mpi.{mpi}.{section}.fresh")
        lat = series(profile, f"measured.mpi.{mpi}.{section}.lat")[FRESH_BYTES]
    except (ProfileMismatch, KeyError):
        return 0
    return max(round((fresh - lat) / (FRESH_BYTES / 1024)), 0)


def post_send(profile: Mapping[str, Any], mpi: str, section: str) -> dict[str, int]:
    """`post_send_ns` from the exchange probe: in the simulator an exchange takes
    send + max(post-send, latency) + receive, a third of a small message each. The
    difference of two probes must compare runs in the same state of the host: in
    one host state's figures (`in_state`) from the medians, that state's runs being
    alike; else from the best run of each probe (`lo`), since on a guest whose
    vCPU-to-vCPU latency is bimodal a median of five can land in the slow mode for
    one probe and the fast one for the other (docs/validation.md, "S3 channels").
    A single run of the other state among a state's few (its hop read before the
    host moved) is such a best run, hence not the best runs there."""
    stat = "median" if profile.get("state") else "lo"
    exch = float(figure(profile, f"measured.mpi.{mpi}.{section}.exch")[stat])
    lat = series(profile, f"measured.mpi.{mpi}.{section}.lat", stat)
    small = statistics.median(v for x, v in lat.items() if x <= 64)
    return {"post_send_ns": round(exch - 2 * small / 3)} if exch > small else {}


def eager_limit(profile: Mapping[str, Any], mpi: str, section: str = "shm") -> int:
    """The largest eager message on `section`'s curve, or the simulator's default."""
    switch = protocol_switch(series(profile, f"measured.mpi.{mpi}.{section}.lat"))
    return switch[0] if switch else EAGER_LIMIT


#: The lab's channels (host/domains.py): the profile section measuring each, the
#: simulator's channel table it sets, the domain fields and transport order.
LAB_CHANNELS = {
    "net": ("bridge", "bridge", {"nic": "bridge"}, ["sm", "net"]),
    "shm": ("netns_shm", "ivshmem", {"ivshmem": "lab"}, ["sm", "ivshmem", "net"]),
}


def lab_channel(profile: Mapping[str, Any], mpi: str, channel: str, fresh: bool = False
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fields of every domain, `[mpi]` fields) for the lab's `channel` ("net" or
    "shm") between domains that are network namespaces. ProfileMismatch when the
    profile lacks the channel's figures (`vhpc calibrate --only channels`)."""
    section, table, domain, transports = LAB_CHANNELS[channel]
    limit = eager_limit(profile, mpi, section)
    return dict(domain), {"transports": list(transports), "eager_limit": limit,
                          table: shm_channel(profile, mpi, section, fresh),
                          **local_send(profile, mpi, section, limit)}


def linux(profile: Mapping[str, Any]) -> dict[str, int]:
    hz = int(figure(profile, "measured.os.hz"))
    slice_us = BASE_SLICE_US
    try:
        slice_us = min(slice_us, round(median(profile, "measured.os.sched_slice") / 1000))
    except ProfileMismatch:
        pass
    return {"tick_us": round(1e6 / hz), "slice_us": max(slice_us, 1)}


def threads_per_rank(profile: Mapping[str, Any], mpi: str) -> int:
    """A rank's threads (its own and the MPI's helpers), 1 if not measured."""
    try:
        return max(round(median(profile, f"measured.mpi.{mpi}.threads_per_rank")), 1)
    except ProfileMismatch:
        return 1


def slicer(profile: Mapping[str, Any], layout: str = "two_cpus", tasks: int = 1
           ) -> dict[str, Any]:
    """The slicer's fields for domains of `tasks` tasks (threads) each."""
    base = f"measured.slicer.{layout}"
    switch = max(median(profile, f"{base}.forced_switch"), 0.0)
    wakeup = median(profile, "measured.os.wakeup_same_cpu")
    blocked = median(profile, f"{base}.blocked_switch")
    try:
        idle_switch = median(profile, f"{base}.idle_switch")
    except ProfileMismatch:  # measured before the slicer's log was read
        notice = max(blocked - switch - wakeup, 0.0)
        poll_us = max(2 * notice / 1000, MIN_SLICER_POLL_US)
        return {"switch_us": round(switch / 1000), "poll_us": round(poll_us)}
    look = max(blocked - idle_switch - wakeup, 0.0)
    try:
        per_task = max((median(profile, f"{base}.blocked_switch_{TASKS_PROBED}_tasks")
                        - blocked) / (TASKS_PROBED - 1), 0.0)
    except ProfileMismatch:  # measured before that probe existed
        per_task = 0.0
    look += per_task * (tasks - 1)
    return {"switch_us": round(switch / 1000), "watchers": True,
            "idle_switch_us": round(idle_switch / 1000), "look_us": round(look / 1000),
            "poll_us": round(float(figure(profile, "measured.slicer.poll_us")))}


def local_send(profile: Mapping[str, Any], mpi: str, channel: str | None = None,
               limit: int = EAGER_LIMIT) -> dict[str, int]:
    """`mpi.local_send_limit` from the profile's local-send figures (of `channel`'s
    table, given one), or nothing (the simulator's default) when the profile has none
    of them or the limit is at or above the eager limit `limit`."""
    where = f"measured.mpi.{mpi}" + (f".{channel}" if channel else "")
    found = []
    for key in LOCAL_SEND_FIGURES:
        try:
            found.append(median(profile, f"{where}.{key}"))
        except ProfileMismatch:
            pass
    if not found or min(found) >= limit:
        return {}
    return {"local_send_limit": int(min(found))}


def adaptive(profile: Mapping[str, Any]) -> dict[str, int]:
    sleeps = series(profile, "measured.os.sleep_slack_1us")
    shortest = sleeps.get(1, min(sleeps.values()))
    return {
        "poll_ns": POLL_NS,
        "polls_before_yield": SPIN_US * 1000 // POLL_NS,
        "adaptive_spin_min_us": SPIN_MIN_US,
        "adaptive_futile_yields": 1,
        "adaptive_sleep_min_us": SLEEP_MIN_US,
        "adaptive_sleep_extra_ns": max(round(shortest - SLEEP_MIN_US * 1000), 0),
        "adaptive_sleep_max_us": SLEEP_MAX_US,
    }


def overlay(profile: Mapping[str, Any], mpi: str, *, slicer_layout: str = "two_cpus",
            ranks_per_domain: int = 1, fresh: bool = False) -> dict:
    """Scenario fields for ranks of `mpi` on the profiled host (every domain
    talks through shared memory: the lab's domains are cgroups of one kernel),
    `ranks_per_domain` ranks in a domain; `fresh`: ranks that send data they
    have just computed (`fresh_data`). A published profile's parameters are
    its scenario fields as they are."""
    if profile["profile"].get("kind") == "published":
        return copy.deepcopy(dict(profile["parameters"]))
    switch = max(round(median(profile, "measured.os.yield_handover")) - POLL_NS, 0)
    limit = eager_limit(profile, mpi)
    return {
        "hypervisor": {
            "vcpu_switch_ns": switch,
            "linux": linux(profile),
            "slicer": slicer(profile, slicer_layout,
                             tasks=ranks_per_domain * threads_per_rank(profile, mpi)),
        },
        "mpi": {"between_domains": "shm", "shm": shm_channel(profile, mpi, fresh=fresh),
                **adaptive(profile), "eager_limit": limit,
                **local_send(profile, mpi, limit=limit),
                **measured_channels(profile, mpi, fresh)},
    }


def measured_channels(profile: Mapping[str, Any], mpi: str, fresh: bool = False
                      ) -> dict[str, dict[str, int]]:
    """`[mpi.bridge]` and `[mpi.ivshmem]` of this host when the profile measured them
    (`vhpc calibrate --only channels`), so that any scenario on the profile with
    `nic = "bridge"` or an ivshmem group gets this host's costs; else nothing (the
    simulator's defaults)."""
    found = {}
    for section, table, _, _ in LAB_CHANNELS.values():
        try:
            found[table] = shm_channel(profile, mpi, section, fresh)
        except ProfileMismatch:
            pass
    return found


#: `[measured.mpi.<mpi>]` sections whose probes run two ranks on two CPUs: their
#: figures depend on the host state (vhpc.lab.hop).
CROSS_CPU_SECTIONS = ("shm", "tcp", "bridge", "netns_shm")
#: Their figures of a message's cost (not the byte counts and send limits).
MESSAGE_FIGURES = ("lat", "bw", "bibw", "fresh", "exch")


def states(profile: Mapping[str, Any]) -> list[str]:
    """The host states a calibration saw (`measured.states`, vhpc.lab.hop), lower
    hop first; empty when it saw one."""
    found = profile.get("measured", {}).get("states", {})
    return [name for name in found if isinstance(found[name], Mapping)]


def in_state(profile: Mapping[str, Any], state: str | None) -> dict:
    """The profile as measured in one host state: that state's figures over those
    of every probe (None: the profile as it is). ProfileMismatch for a state the
    calibration did not see."""
    if state is None:
        return dict(profile)
    found = profile.get("measured", {}).get("states", {}).get(state)
    if not isinstance(found, Mapping):
        raise ProfileMismatch(f"no host state {state!r} in the profile "
                              f"(it has: {', '.join(states(profile)) or 'one state'})")
    figures = {k: v for k, v in found.items() if k != "hop"}
    return {**profile, "state": state,
            "measured": deep_merge(copy.deepcopy(dict(profile["measured"])), figures)}


def borrowed(profile: Mapping[str, Any], state: str, mpi: str,
             sections: tuple[str, ...] = CROSS_CPU_SECTIONS) -> list[str]:
    """The message figures between the two CPUs of `mpi` (in `sections`) that no
    probe measured in `state`: `in_state` reads them from every run (mostly the
    other state's), as `<section>.<figure>`."""
    base = profile.get("measured", {}).get("mpi", {}).get(mpi, {})
    seen = profile.get("measured", {}).get("states", {}).get(state, {}).get("mpi", {}).get(mpi, {})
    return [f"{section}.{key}" for section in sections
            if isinstance(base.get(section), Mapping)
            for key, fig in base[section].items()
            if key in MESSAGE_FIGURES and isinstance(fig, Mapping) and "median" in fig
            and key not in seen.get(section, {})]


def deep_merge(base: dict, top: Mapping[str, Any]) -> dict:
    """`base` with `top`'s values on top, tables merged key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def locate(name: str, origin: str) -> Path:
    """A profile named in a scenario: a path (relative to the scenario's folder)
    when it has a slash or ends in .toml, else profiles/<name>.toml."""
    if "/" in name or name.endswith(".toml"):
        return (Path(origin).parent / name).resolve()
    return paths.REPO / "profiles" / f"{name}.toml"


def resolve(text: str, origin: str) -> str:
    """Scenario TOML whose `host.profile` (and `host.mpi`, default mpich) is replaced
    by the profile's parameters, under the scenario's own values (which win).
    Text without `host.profile` comes back unchanged. ProfileMismatch names the
    scenario, the field and the profile's problem."""
    if "profile" not in text:
        return text
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text  # the native core reports it, with the field
    host = doc.get("host")
    if not isinstance(host, dict) or "profile" not in host:
        return text
    name, mpi = host.pop("profile"), host.pop("mpi", "mpich")
    if not isinstance(name, str) or not name:
        raise ProfileMismatch(f"{origin}: field `host.profile`: must name a profile, got {name!r}")
    try:
        found = host_profile.load_profile(locate(name, origin))
        params = overlay(found, mpi)
    except host_profile.ProfileError as exc:
        raise ProfileMismatch(f"{origin}: field `host.profile`: {exc.message}") from None
    except ProfileMismatch as exc:
        raise ProfileMismatch(f"{origin}: field `host.profile` ({name}, mpi {mpi}): {exc}") from None
    return tomli_w.dumps(deep_merge(params, doc))
