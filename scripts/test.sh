#!/usr/bin/env bash
# scripts/test.sh — the whole test suite, on a fresh machine or a warm one.
# Installs what it needs (scripts/setup.sh, cached under ~/.cache/rlfleet),
# checks formatting and lints, builds the binaries the integration tests
# start, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo fmt --all --check
cargo clippy --release --workspace --all-targets -- -D warnings
cargo build --release --workspace --bins
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --workspace 2>&1 | tee "$log"
# One closing line for the whole workspace (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "summary: %d passed, %d failed\n", p, f; exit (f > 0) }' "$log"
