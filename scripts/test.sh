#!/usr/bin/env bash
# scripts/test.sh — the test suite, on a fresh machine or a warm one.
#
#   bash scripts/test.sh           the full suite (what CI runs)
#   bash scripts/test.sh --quick   the fast tier, for every change
#
# Both install what they need (scripts/setup.sh, cached under
# ~/.cache/rlfleet), check formatting and the tidy rules, and build with
# the same features, so switching between them rebuilds nothing.
#
# The full suite: clippy over the whole workspace (with and without the
# `mpi` feature), the binaries the integration tests start, the Python
# package (maturin) in the cached venv, every test of the workspace with
# the `mpi` feature (real `mpirun`; OpenMPI comes from setup.sh), the
# numeric kernels' tests once more with the portable path forced, and
# each cargo-fuzz target for a bounded time (scripts/fuzz.sh).
#
# The fast tier: clippy of the crates that differ from the base
# ($RLFLEET_BASE, default: the upstream branch if there is one, else
# HEAD, so uncommitted work), every unit test of every crate, and the
# workflow conformance cases over the in-process transport (real
# learner and workflows, actors as tasks). No learning-to-target test
# (the suite's `learn::` modules), no QUIC or MPI process test, no fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
# What the tests use too (Slurm, systemd's tools, schemathesis, ...).
export RLFLEET_SETUP=test
. scripts/setup.sh
cargo fmt --all --check
# The source tree's own rules first (they take seconds): every module
# imports only layers below it (ARCHITECTURE.md's `layers` blocks), no
# import cycle at any depth, files of one concept, what each crate's
# manifest must not name (tidy/).
cargo test --release -p rlfleet-tidy
features=(--features rlfleet-tests/mpi,rlfleet-bench/mpi)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

# The hand-written numeric kernels' tests once more with the portable
# path forced (rlfleet-kernels' switch): the paths a CPU without AVX2 or
# AVX-512 takes, tested on one that has them.
portable_kernel_tests() {
    RLFLEET_PORTABLE_KERNELS=1 cargo test --release --workspace --lib "${features[@]}" -- \
        cpu:: conv:: dense:: gemm norm:: rmsprop:: nets:: agents::adam agents::optimizer
}

# The packages whose files differ from the base; "all" when the
# workspace's manifest or lock file does.
changed_packages() {
    local base="${RLFLEET_BASE:-}"
    if [ -z "$base" ]; then
        base=$(git rev-parse --abbrev-ref --symbolic-full-name '@{upstream}' 2>/dev/null || echo HEAD)
    fi
    { git diff --name-only "$base" -- . ; git ls-files --others --exclude-standard; } | sort -u |
    while read -r f; do
        case "$f" in Cargo.toml|Cargo.lock) echo all; continue ;; esac
        local d
        d=$(dirname "$f")
        while [ "$d" != "." ] && [ ! -f "$d/Cargo.toml" ]; do d=$(dirname "$d"); done
        [ "$d" != "." ] && [ "$d" != fuzz ] || continue
        sed -n 's/^name = "\(.*\)"/\1/p' "$d/Cargo.toml" | head -n 1
    done | sort -u
}

if [ "$quick" -eq 1 ]; then
    mapfile -t pkgs < <(changed_packages)
    if printf '%s\n' "${pkgs[@]}" | grep -qx all; then
        cargo clippy --release --workspace --all-targets -- -D warnings
    elif [ ${#pkgs[@]} -gt 0 ]; then
        cargo clippy --release "${pkgs[@]/#/-p}" --all-targets -- -D warnings
    fi
    # The in-memory workflow tests start the learner binary.
    cargo build --release --workspace --bins "${features[@]}"
    (
        rc=0
        cargo test --release --workspace --lib --bins "${features[@]}" || rc=1
        portable_kernel_tests || rc=1
        cargo test --release --workspace --test suite "${features[@]}" -- \
            conformance::inproc:: conformance::every_case inproc:: || rc=1
        exit "$rc"
    ) 2>&1 | tee "$log" || status=$?
else
    cargo clippy --release --workspace --all-targets -- -D warnings
    cargo clippy --release --workspace --all-targets "${features[@]}" -- -D warnings
    cargo build --release --workspace --bins "${features[@]}"
    # The Python package (python/, maturin), installed into the cached venv for
    # the tests that drive a learner from Python. Its own target dir: maturin
    # builds pyo3 as an extension module, which the binaries' pyo3 is not.
    "$RLFLEET_PYTHON_VENV/bin/maturin" build --release --quiet -m python/Cargo.toml \
        --target-dir target/maturin -o target/wheels -i "$RLFLEET_PYTHON"
    "$RLFLEET_PYTHON_VENV/bin/pip" install -q --force-reinstall --no-deps target/wheels/rlfleet-*.whl
    (
        rc=0
        cargo test --release --workspace "${features[@]}" || rc=1
        portable_kernel_tests || rc=1
        exit "$rc"
    ) 2>&1 | tee "$log" || status=$?
    # The fuzz targets (fuzz/), a few seconds each: frames, configs, checkpoints.
    fuzz_status=0
    bash scripts/fuzz.sh "${RLFLEET_FUZZ_SECS:-20}" || fuzz_status=$?
    [ "$fuzz_status" -eq 0 ] || { echo "fuzz: a target failed" >&2; status=1; }
fi
# One closing line for the whole run (cargo prints one per test binary).
# It fails when a test failed, none ran, or cargo itself failed (a test
# binary that crashed prints no result line of its own).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "summary: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
exit "$status"
