#!/usr/bin/env bash
# scripts/torch-venv.sh — a venv with PyTorch 2.11.0 for the benchmarks that
# compare against PyTorch from Python (`rlfleet-bench dqn`), idempotently,
# under $RLFLEET_CACHE (default ~/.cache/rlfleet). Not needed to build or
# test rlfleet. PyPI's torch 2.11.0 wheel for Linux is the CUDA 13 build and
# imports only with its NVIDIA dependency wheels, so this installs torch with
# its dependencies (about 4.7 GB and a minute here), not the wheel alone.
# The references `rlfleet-bench reference` runs need the envs too: MinAtar
# (without its plotting dependencies), and Gymnasium with ale-py and OpenCV
# for Atari, pinned as scripts/python-requirements.txt pins them.
# Prints the venv's python; `rlfleet-bench dqn` finds it there by itself
# (or set RLFLEET_TORCH_PYTHON to another Python that imports torch).
set -euo pipefail
cache="${RLFLEET_CACHE:-$HOME/.cache/rlfleet}"
venv="$cache/venv-torch-2.11.0"
if [ ! -f "$venv/.complete" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch==2.11.0 numpy==2.2.6
    touch "$venv/.complete"
fi
if [ ! -f "$venv/.envs-complete" ]; then
    "$venv/bin/pip" install -q gymnasium==1.2.2 ale-py==0.11.2 opencv-python-headless==4.12.0.88
    "$venv/bin/pip" install -q --no-deps minatar==1.0.15
    touch "$venv/.envs-complete"
fi
echo "$venv/bin/python"
