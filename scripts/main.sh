#!/usr/bin/env bash
# scripts/main.sh — the main job: DQN on CartPole-v1 with the embedded
# `single` workflow, trained until 10 greedy evaluation episodes average
# >= 475. Installs what it needs first (scripts/setup.sh). Extra arguments go
# to `learner-server run` (e.g. --no-progress).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release -p learner-server
exec ./target/release/learner-server run config/cartpole-dqn-single.toml "$@"
