#!/usr/bin/env bash
# scripts/main.sh — the main job: the embedded default. The learner daemon on
# loopback plus 4 real actor-client processes over QUIC train DQN on
# CartPole-v1 with the `async` workflow until 10 greedy evaluation episodes
# average >= 475 and a confirming evaluation of 100 more does too. Installs what it needs first (scripts/setup.sh). Extra
# arguments go to `learner-server run` (e.g. --no-progress).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
features=()
# A CUDA libtorch (LIBTORCH_VARIANT=cu130): link libtorch_cuda so the GPU is found.
[ "${LIBTORCH_VARIANT:-cpu}" = cu130 ] && features=(--features learner-server/cuda)
cargo build --release -p learner-server -p actor-client "${features[@]}"
exec ./target/release/learner-server run config/cartpole-dqn-async.toml --local-actors 4 "$@"
