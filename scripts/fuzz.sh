#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] — runs every cargo-fuzz target of fuzz/ for
# SECONDS each (default 30): frames off the wire, run configs (TOML and
# JSON) and checkpoint files. The test command runs it with a few seconds
# per target; run it longer by hand (see BENCHMARKS.md for figures).
#
# Installs cargo-fuzz (pinned, cached under $RLFLEET_CACHE), seeds the
# corpora (fuzz/corpus/, ignored by git) with a frame of every message type,
# every shipped config as TOML and JSON, and a checkpoint that a real run
# writes; needs the workspace's binaries built (scripts/test.sh builds them).
#
# cargo-fuzz passes rustc `-Z` flags (AddressSanitizer, coverage); this
# machine has only a stable toolchain, which takes them with
# RUSTC_BOOTSTRAP=1, for the fuzz build alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
secs="${1:-30}"
cache="${RLFLEET_CACHE:-$HOME/.cache/rlfleet}"
fuzz_ver=0.13.2
root="$cache/cargo-fuzz-$fuzz_ver"
if [ ! -x "$root/bin/cargo-fuzz" ]; then
    echo "fuzz: installing cargo-fuzz $fuzz_ver into $root" >&2
    cargo install -q --locked cargo-fuzz --version "$fuzz_ver" --root "$root"
fi
export PATH="$root/bin:$PATH"

corpus=fuzz/corpus
target/release/fuzz-seeds "$corpus"
# A real checkpoint: a few CartPole episodes of DQN, embedded.
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
cat > "$run/seed.toml" <<TOML
name = "fuzz-seed"
env = "CartPole-v1"
agent = "dqn"
workflow = "single"
output_dir = "$run/out"
[stop]
max_episodes = 5
TOML
RUST_LOG=warn target/release/learner-server run --no-progress "$run/seed.toml" > /dev/null
mkdir -p "$corpus/checkpoint"
cp "$run/out/checkpoint.safetensors" "$corpus/checkpoint/cartpole-dqn.safetensors"

export RUSTC_BOOTSTRAP=1
cargo fuzz build -O --fuzz-dir fuzz
for t in frame config checkpoint; do
    echo "fuzz: $t for ${secs}s" >&2
    log="$run/$t.log"
    if ! cargo fuzz run -O --fuzz-dir fuzz "$t" "$corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 > "$log" 2>&1; then
        tail -n 80 "$log" >&2
        echo "fuzz: $t failed; the input is in fuzz/artifacts/$t/" >&2
        exit 1
    fi
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done)' "$log" | sed "s/^/fuzz: $t: /"
done
