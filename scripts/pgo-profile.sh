#!/usr/bin/env bash
# Profile-guided optimisation of the engine (docs/sim.md, "Engine speed"):
# builds the release example `run` and the native extension instrumented (in
# target/pgo-gen), runs both on a training set and merges the counts into OUT (default
# target/pgo/vhpc-sim.profdata), which `make venv` and `make bench-sim` then
# hand to rustc (-Cprofile-use). The profile changes only how the compiler
# lays out and inlines code, never what it computes: reports are identical
# with and without it. A profile older than the sources still works (the
# functions that changed are optimised without it); make regenerates it.
#
#     scripts/pgo-profile.sh [OUT]
#
# Training set, run by both: every scenario in scenarios/ (the scale scenario
# cut to 10 simulated seconds) and S0's pressure shapes as `vhpc reproduce s0` runs
# them (npb.lu class A on 2 and 4 domUs, busy_poll and hv_yield, Credit and
# SEDF), the runs that take nearly all of its time.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/pgo/vhpc-sim.profdata}

find_profdata() { find "$(rustc --print sysroot)" -name llvm-profdata -type f 2>/dev/null | head -n 1; }
profdata=$(find_profdata)
if [ -z "$profdata" ]; then
    rustup component add llvm-tools   # llvm-profdata of rustc's own LLVM version
    profdata=$(find_profdata)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The example, and the native extension vhpc._core: there the engine is
# compiled as a dependency of vhpc-py, under other symbol names than in the
# example, so each is trained on the same runs (one profile holds both).
export RUSTFLAGS="-Cprofile-generate=$work/raw" CARGO_TARGET_DIR=target/pgo-gen
export PYO3_PYTHON=${PYO3_PYTHON:-$(command -v python3)}
cargo build --quiet --release -p vhpc-sim --example run
cargo build --quiet --release -p vhpc-py --features extension-module  # as maturin builds it
unset RUSTFLAGS CARGO_TARGET_DIR
rm -rf "$work/raw"   # counts of build scripts: not the engine's
run=target/pgo-gen/release/examples/run

# S0's pressure setup with N domUs (2 vCPUs, 2 ranks each) under SCHEDULER.
pressure() {
    local scheduler=$1 n=$2 policy=$3
    sed -e "s/^scheduler = .*/scheduler = \"$scheduler\"/" \
        -e "s/^wait_policy = .*/wait_policy = \"$policy\"/" scenarios/s0-pressure.toml
    for i in $(seq 2 "$n"); do
        printf '\n[[domains]]\nname = "domU%s"\nvcpus = 2\n' "$i"
        printf '\n[[jobs]]\nname = "domU%s"\nworkload = "npb.lu"\nranks = ["domU%s", "domU%s"]\n' "$i" "$i" "$i"
        printf 'wait_policy = "%s"\nparams = { class = "A" }\n' "$policy"
    done
}

for f in scenarios/*.toml; do
    if [[ $f == *scale-* ]]; then
        sed 's/^limit_ms = .*/limit_ms = 10000/' "$f" > "$work/scale.toml"
        f=$work/scale.toml
    fi
    "$run" "$f" 1 > /dev/null 2>&1
done
for scheduler in credit sedf; do
    for n in 2 4; do
        for policy in busy_poll hv_yield; do
            sc=$work/pressure-$scheduler-$n-$policy.toml
            pressure "$scheduler" "$n" "$policy" > "$sc"
            if [ "$scheduler" = sedf ]; then  # S0's domU slice under SEDF
                awk '/^\[\[/ { section = $0 } { print }
                     section == "[[domains]]" && /^name = "domU/ {
                         print "sedf = { period_us = 100000, slice_us = 0, extratime = true }" }' \
                    "$sc" > "$sc.sedf" && mv "$sc.sedf" "$sc"
            fi
            "$run" "$sc" 1 > /dev/null 2>&1
        done
    done
done

# The same files through the extension's run_many (an abi3 module: any
# Python 3.9 or later loads it).
ls scenarios/*.toml "$work"/*.toml | grep -v 'scenarios/scale-' > "$work/files"
"$PYO3_PYTHON" - target/pgo-gen/release/lib_core.so "$work/files" <<'PY'
import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("_core", sys.argv[1])
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
files = Path(sys.argv[2]).read_text().split()
core.run_many([(Path(f).read_text(), f, 1) for f in files])
PY

mkdir -p "$(dirname "$out")"
"$profdata" merge -o "$out" "$work/raw"
echo "PGO profile: $out"
