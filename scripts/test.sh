#!/usr/bin/env bash
# scripts/test.sh — the whole test suite, on a fresh machine or a warm one.
# Installs what it needs (scripts/setup.sh, cached under ~/.cache/rlfleet),
# checks formatting, the tidy rules and lints, builds the binaries the integration tests
# start, then runs every test of the workspace — with the `mpi` feature, so
# the MPI tests run real `mpirun` (OpenMPI comes from setup.sh), and with
# the Python package built by maturin and installed into the cached venv.
# The default build (no features) needs no MPI; clippy checks it too.
# Last, each cargo-fuzz target runs for a bounded time (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo fmt --all --check
# The source tree's own rules first (they take seconds): every module
# imports only layers below it (ARCHITECTURE.md's `layers` blocks), no
# import cycle at any depth, files of one concept (tidy/).
cargo test --release -p rlfleet-tidy
features=(--features rlfleet-tests/mpi,rlfleet-bench/mpi)
cargo clippy --release --workspace --all-targets -- -D warnings
cargo clippy --release --workspace --all-targets "${features[@]}" -- -D warnings
cargo build --release --workspace --bins "${features[@]}"
# The Python package (python/, maturin), installed into the cached venv for
# the tests that drive a learner from Python. Its own target dir: maturin
# builds pyo3 as an extension module, which the binaries' pyo3 is not.
"$RLFLEET_PYTHON_VENV/bin/maturin" build --release --quiet -m python/Cargo.toml \
    --target-dir target/maturin -o target/wheels -i "$RLFLEET_PYTHON"
"$RLFLEET_PYTHON_VENV/bin/pip" install -q --force-reinstall --no-deps target/wheels/rlfleet-*.whl
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --workspace "${features[@]}" 2>&1 | tee "$log" || status=$?
# The fuzz targets (fuzz/), a few seconds each: frames, configs, checkpoints.
fuzz_status=0
bash scripts/fuzz.sh "${RLFLEET_FUZZ_SECS:-20}" || fuzz_status=$?
[ "$fuzz_status" -eq 0 ] || { echo "fuzz: a target failed" >&2; status=1; }
# One closing line for the whole workspace (cargo prints one per test binary).
# It fails when a test failed, none ran, or cargo itself failed (a test
# binary that crashed prints no result line of its own).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "summary: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
exit "$status"
