# vhpc — the README's commands live here: `make demo`, `make test`.
# Works from a fresh Debian 12 machine: installs what it needs (apt, rustup, a venv).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# rustup installs cargo here; put it first so a fresh install is found at once.
export PATH := $(HOME)/.cargo/bin:$(PATH)

VENV := .venv
VENV_STAMP := $(VENV)/.vhpc-installed
VHPC := $(VENV)/bin/vhpc
# Build and test the PyO3 crate against the venv's interpreter (the one maturin uses).
export PYO3_PYTHON := $(CURDIR)/$(VENV)/bin/python

# python3-dev: `cargo test` links the PyO3 crate against libpython.
# curl, ca-certificates: for rustup when cargo is missing.
# hpcc: HPC Challenge, the external suite `vhpc lab` has an adapter for.
# time: GNU time, measures peak memory in `make bench-sim`.
# libvirt-clients, libxml2-utils: virt-xml-validate (which runs xmllint) checks `vhpc plan`'s domain XML.
SYSTEM_PACKAGES := mpich libmpich-dev openmpi-bin libopenmpi-dev gfortran hpcc \
	build-essential python3-venv python3-dev curl ca-certificates time \
	libvirt-clients libxml2-utils

# What the native extension is built from: rebuild the venv install when these change.
NATIVE_SOURCES := pyproject.toml Cargo.toml $(wildcard Cargo.lock) \
	$(shell find crates -type f \( -name '*.rs' -o -name Cargo.toml \) 2>/dev/null)

# Profile-guided optimisation (scripts/pgo-profile.sh, docs/sim.md): `make pgo`
# records the engine's branch and call counts on a training set; once that
# profile exists, the native extension and bench-sim's engine are built with it
# (the same results, 8-15 % faster).
PGO_PROFILE := target/pgo/vhpc-sim.profdata
PGO_RUSTFLAGS = $(if $(wildcard $(PGO_PROFILE)),-Cprofile-use=$(CURDIR)/$(PGO_PROFILE))

.PHONY: help deps-system venv pgo setup test demo bench bench-runtime bench-hybrid bench-coll bench-ci bench-ci-5ranks bench-sim bench-slicer bench-sweep s0-sim s0-results s4-hints calibrate s0-predict s3-calibrate s3-lab sweep-smoke sweep-overcommit clean

help:
	@echo "make demo           build everything, show libvhpc_wait at work, run experiments/s0-quick, reproduce S0 in the simulator"
	@echo "make test           build everything, then run the Rust and Python tests"
	@echo "make setup          system packages, Rust, .venv, runtime library, benchmarks"
	@echo "make bench          run the benchmarks (writes docs/runtime-bench.md, docs/hybrid-bench.md, docs/sim-bench.md, docs/slicer-bench.md)"
	@echo "make bench-hybrid   MPI + OpenMP under vhpc run, 2 and 1 CPUs (writes docs/hybrid-bench.md, ~3 min)"
	@echo "make bench-coll     collectives and window fences on a shared CPU: the library's twins against its own choice (writes docs/coll-bench.md, ~15 min)"
	@echo "make bench-ci       mpi4py's test suite, 4 ranks on 2 and 1 CPUs, every MPI (docs/ci-bench.md, hours; finished jobs kept in results/ci-bench, a rerun goes on)"
	@echo "make bench-ci-5ranks  the same at 5 ranks on 2 CPUs, Debian's MPICH (docs/ci-bench-5ranks.md, about half an hour)"
	@echo "make bench-sim      the simulator's speed and memory only (writes docs/sim-bench.md)"
	@echo "make pgo            the engine's profile for profile-guided optimisation (target/pgo/, ~1 min); make venv uses it once there"
	@echo "make bench-slicer   the lab slicer's switch latency and CPU use (writes docs/slicer-bench.md, ~10 s)"
	@echo "make bench-sweep    the same points on the local Dask cluster and through run_many (writes docs/sweep-bench.md)"
	@echo "make sweep-smoke    the 32-point smoke sweep on the local Dask cluster (results/smoke, ~15 s)"
	@echo "make sweep-overcommit  the over-commitment sweep, 6000 points (docs/results/overcommit/)"
	@echo "make s0-sim         S0 in the simulator, means within ±5 % and ±2 % (docs/results/s0-sim*.md)"
	@echo "make s0-results     run the S0 experiments, 5 repetitions (docs/results/s0-native/)"
	@echo "make s4-hints       the hint-driven slicer: time-sliced ping-pong and pressure, hints vs none (docs/results/s4-hints.md, ~15 min)"
	@echo "make calibrate      measure this host into a profile (profiles/, ~2 min, on a quiet machine)"
	@echo "make s0-predict     the S0 experiments predicted on that profile beside make s0-results (docs/results/s0-predict/)"
	@echo "make s3-calibrate   add the channel figures (network namespaces: bridge vs shared memory) to that profile (~1 min, root)"
	@echo "make s3-lab         S3's network vs shared-memory channels measured, 5 repetitions, and predicted (docs/results/s3-channels*, ~6 min, root)"
	@echo "make clean          remove build products, target/ and .venv/"

deps-system:
	@if dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
		echo "system packages: all present"; \
	else \
		echo "installing system packages: $(SYSTEM_PACKAGES)"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y $(SYSTEM_PACKAGES); \
	fi
	@if command -v cargo >/dev/null 2>&1; then \
		echo "rust: $$(cargo --version)"; \
	else \
		echo "installing Rust via rustup"; \
		curl https://sh.rustup.rs -sSf | sh -s -- -y --profile minimal; \
	fi

venv: $(VENV_STAMP)

# No build isolation: build with the maturin just installed (its build hook
# runs `maturin` from PATH, hence the venv's bin/ first).
$(VENV_STAMP): $(NATIVE_SOURCES) $(wildcard $(PGO_PROFILE))
	[ -x $(VENV)/bin/python ] || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q 'maturin>=1.5,<2'
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" RUSTFLAGS="$(PGO_RUSTFLAGS)" \
		$(VENV)/bin/pip install -q --no-build-isolation -e '.[test]'
	touch $@

pgo: $(PGO_PROFILE)

$(PGO_PROFILE): $(NATIVE_SOURCES) scripts/pgo-profile.sh
	scripts/pgo-profile.sh $@

setup: deps-system
	$(MAKE) venv
	$(VHPC) runtime build
	$(MAKE) -C bench

test: setup
	cargo test --workspace
	# The profiling build's event counter (off in shipped builds), so it keeps compiling.
	cargo test -p vhpc-sim --features event-counts --lib engine::counts
	$(VENV)/bin/pytest -q tests

# The fix at work on one core, S0's contrast measured by the lab (~25 s) and
# predicted for this host beside it, then S0 predicted by the simulator beside the
# published figures (~5 s).
demo: setup
	$(VHPC) runtime demo
	rm -rf results/demo-s0-quick
	$(VHPC) lab run experiments/s0-quick.toml --out results/demo-s0-quick
	$(VHPC) lab compare results/demo-s0-quick --baseline default
	$(VHPC) lab predict experiments/s0-quick.toml --profile $(DEMO_PROFILE) --results results/demo-s0-quick
	$(VHPC) reproduce s0

bench-runtime: setup
	$(VHPC) runtime bench --wheels --out docs/runtime-bench.md

# The simulator's speed and memory (docs/sim-bench.md, ~5 min): criterion
# benchmarks of the engine (crates/vhpc-sim/benches/engine.rs), then whole runs
# measured side by side, 5 repetitions: `vhpc reproduce s0`, the 48-core scale
# scenario for one simulated hour, and its peak memory at 60 s, 600 s and 1 h.
# This engine built with the PGO profile (bench.py builds the earlier ones without).
bench-sim: deps-system
	$(MAKE) pgo
	$(MAKE) venv
	export RUSTFLAGS="-Cprofile-use=$(CURDIR)/$(PGO_PROFILE)" && \
	cargo build --release -p vhpc-sim --example run && \
	cargo bench -p vhpc-sim --bench engine && \
	$(VENV)/bin/python -m vhpc.sim.bench --reps 5 --out docs/sim-bench.md

# The lab slicer's domain-switch latency, median and p99, and its own CPU use
# (docs/slicer-bench.md, ~10 s; skipped with the reason if the freezer is unavailable).
bench-slicer: setup
	$(VENV)/bin/python -m vhpc.host.bench --out docs/slicer-bench.md

# MPI + OpenMP, 2 ranks x 2 threads on 2 CPUs and on 1 (docs/hybrid-bench.md, ~3 min).
bench-hybrid: setup
	$(VHPC) runtime bench-hybrid --out docs/hybrid-bench.md

# mpi4py's test suite as a CI runner runs it (module by module, each capped).
bench-coll: setup
	$(VHPC) runtime bench-coll --out docs/coll-bench.md

bench-ci: setup
	$(VHPC) runtime bench-ci --out docs/ci-bench.md

# The same suite at 5 ranks on 2 CPUs, where the MPI as is busy-polls (issue 11's case).
bench-ci-5ranks: setup
	$(VHPC) runtime bench-ci --ranks 5 --mpi debian-mpich --cpus "2 CPUs" --out docs/ci-bench-5ranks.md

bench: bench-runtime bench-hybrid bench-sim bench-slicer

# Sweeps (docs/sim.md, "Sweeps"): every point a Dask task on a local cluster, one
# Parquet file per point under results/, then `vhpc report` draws them.
sweep-smoke: deps-system
	$(MAKE) venv
	$(VHPC) sim sweep scenarios/sweeps/smoke.toml --out results/smoke
	$(VHPC) report results/smoke

# The over-commitment sweep from scratch (6000 points of 5 s simulated), its figure
# and report.md in docs/results/overcommit/; docs/results/overcommit.md reads them.
sweep-overcommit: deps-system
	$(MAKE) venv
	rm -rf results/overcommit
	$(VHPC) sim sweep scenarios/sweeps/overcommit.toml --out results/overcommit
	$(VHPC) report results/overcommit --out docs/results/overcommit

# The same points on the local Dask cluster and through run_many, side by side
# (docs/sweep-bench.md): wall times and the cluster's overhead per point.
BENCH_SWEEP_POINTS ?= 1000
bench-sweep: deps-system
	$(MAKE) venv
	$(VENV)/bin/python -m vhpc.sim.sweep_bench --points $(BENCH_SWEEP_POINTS) --out docs/sweep-bench.md

# S0 in the simulator (about a minute): the default (5 seeds a cell, more until
# its mean is known within ±5 %), and every mean within ±2 % (up to 1000 seeds a
# cell) to see where the model's means settle (docs/validation.md reads both).
s0-sim: deps-system
	$(MAKE) venv
	$(VHPC) reproduce s0 --markdown docs/results/s0-sim.md
	$(VHPC) reproduce s0 --precision 2 --max-seeds 1000 --markdown docs/results/s0-sim-2pct.md >/dev/null

# The S0 experiments on this machine, 5 repetitions each, with their reports
# (docs/results/s0-native/<experiment>/report.md); docs/results/s0-native.md reads them.
# s0-pressure-vcpu-d4 keeps its own 20 repetitions (the MPI default's times are bimodal),
# s0-pressure 15 (its runs split between the host's two states; with 5, a row held 1-3
# runs and two runs of it 90 minutes apart disagreed by more than the 20 % band).
S0_EXPERIMENTS := s0-quick s0-beff s0-pressure s0-pressure-vcpu-d4
S0_RESULTS := docs/results/s0-native
s0-results: setup
	for e in $(S0_EXPERIMENTS); do \
		rm -rf results/$$e; \
		reps=$$(case $$e in s0-pressure-vcpu-d4) echo 20;; s0-pressure) echo 15;; *) echo 5;; esac); \
		$(VHPC) lab run experiments/$$e.toml --reps $$reps --out results/$$e; \
		$(VHPC) report results/$$e --baseline default --out $(S0_RESULTS)/$$e; \
	done

# Issue 14's hint channel in the lab (~15 min): the time-sliced ping-pong with and
# without hints beside the one-core figure, and the pressure experiment (gang and
# per vCPU) with and without hints, side by side; the load average at each step.
S4_HINTS := docs/results/s4-hints
s4-hints: setup
	rm -rf results/s4-hints-pingpong results/s4-hints-pressure
	mkdir -p results
	echo "before: $$(cat /proc/loadavg)" > results/s4-hints-load.txt
	$(VHPC) lab run experiments/s4-hints-pingpong.toml --out results/s4-hints-pingpong
	echo "after the ping-pong: $$(cat /proc/loadavg)" >> results/s4-hints-load.txt
	$(VHPC) lab run experiments/s4-hints-pressure.toml --out results/s4-hints-pressure
	echo "after the pressure experiment: $$(cat /proc/loadavg)" >> results/s4-hints-load.txt
	$(VHPC) report results/s4-hints-pingpong --out $(S4_HINTS)/s4-hints-pingpong
	$(VHPC) report results/s4-hints-pressure --out $(S4_HINTS)/s4-hints-pressure
	$(VENV)/bin/python -m vhpc.lab.hints_report results/s4-hints-pingpong results/s4-hints-pressure \
		--load results/s4-hints-load.txt --out $(S4_HINTS).md

# The demo predicts s0-quick on this host's profile when `make calibrate` made one,
# else on the committed profile of the machine kind vhpc is developed on.
DEMO_PROFILE = $(if $(wildcard $(PROFILE)),$(PROFILE),profiles/amd-epyc-2cpu.toml)

# This host's profile (vhpc calibrate: microbenchmarks only, ~2 min; refuses a busy machine).
PROFILE ?= $(shell $(VENV)/bin/python -c 'from vhpc import paths; from vhpc.lab import calibrate; print(calibrate.default_out().relative_to(paths.REPO))' 2>/dev/null)
calibrate: setup
	$(VHPC) calibrate --out $(PROFILE)

# Every cell of the S0 experiments simulated on the profile, beside the medians of
# `make s0-results` (results/<experiment>); docs/validation.md reads the tables.
S0_PREDICT := docs/results/s0-predict
s0-predict: setup
	for e in $(S0_EXPERIMENTS); do \
		$(VHPC) lab predict experiments/$$e.toml --profile $(PROFILE) --results results/$$e \
			--markdown $(S0_PREDICT)/$$e.md; \
	done

# S3's inter-VM channels on this machine (issue 13): two domains that are network
# namespaces on a bridge, the MPI over TCP through it or over shared memory
# (experiments/s3-channels.toml). s3-calibrate adds the channel microbenchmarks to
# the host profile (measured.mpi.<mpi>.bridge, .netns_shm); s3-lab runs the
# experiment (the runs stored in docs/results/s3-channels/store), writes the
# statistics (docs/results/s3-channels.md, shm as the baseline) and the report with
# figures (docs/results/s3-channels/report.md), then the simulator on the profile
# beside the medians, ±25 % (docs/results/s3-channels-predict.md). On a busy machine:
# make s3-calibrate CALIBRATE_FLAGS=--force (the load is recorded in the profile).
S3_RESULTS := docs/results/s3-channels
s3-calibrate: setup
	$(VHPC) calibrate --only channels --out $(PROFILE) $(CALIBRATE_FLAGS)

s3-lab: setup
	uptime
	rm -rf $(S3_RESULTS)/store
	$(VHPC) lab run experiments/s3-channels.toml --reps 5 --out $(S3_RESULTS)/store
	$(VHPC) lab compare $(S3_RESULTS)/store --baseline shm --markdown $(S3_RESULTS).md
	$(VHPC) report $(S3_RESULTS)/store --baseline shm --out $(S3_RESULTS)
	$(VHPC) lab predict experiments/s3-channels.toml --profile $(PROFILE) \
		--results $(S3_RESULTS)/store --band 25 --markdown $(S3_RESULTS)-predict.md
	uptime

clean:
	rm -rf build target $(VENV) .pytest_cache
	find python tests -name __pycache__ -type d -prune -exec rm -rf {} +
	find python -name '*.so' -delete
