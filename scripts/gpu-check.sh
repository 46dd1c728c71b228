#!/usr/bin/env bash
# scripts/gpu-check.sh — rlfleet on a real GPU, in one prepared run.
#
#   scripts/gpu-check.sh build      (here, not in CI) builds the stripped
#       `cuda` binaries against torch 2.11.0's libtorch (the CUDA build of
#       the wheel setup.sh caches) and Python 3.12 (pyenv's), packs them
#       with what the GPU machine lacks (libonnxruntime 1.31, libpython
#       3.12 in case it has none, the gymnasium and ale-py wheels) into
#       .gpu/ (git-ignored, under 64 MiB), and prints the device command.
#   scripts/gpu-check.sh device     (there) unpacks .gpu/, points the
#       binaries at the machine's own torch libraries and Python, and runs
#       scripts/gpu_check.py: gpu.json and gpu.log in $OUT (and the Pong
#       learning run's episodes.csv and curve in $OUT/pong-learn). Steps
#       go in order of value — Pong learning (7 min), Pong end to end
#       against `random`, R2D2 against PyTorch, 1 and 4 concurrent Pong
#       runs, then CartPole, resume and the CNN benches — and none starts
#       after GPU_CHECK_DEADLINE seconds (540), so one call of 600 s
#       returns what fitted (GPU_CHECK_ARGS="--steps atari,r2d2,concurrent"
#       runs the rest in a second call; "--pong-secs 480" gives Pong 8 min).
#   scripts/gpu-check.sh --dry-run  (here, and in the test suite) the same
#       steps against this checkout's CPU build (target/release) on tiny
#       budgets, into $OUT (default: a temporary folder), so the script
#       cannot rot.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cache="${RLFLEET_CACHE:-$HOME/.cache/rlfleet}"
bundle="$root/.gpu"

build() {
    . scripts/setup.sh >/dev/null
    local torch="$cache/libtorch-2.11.0-cuda" py312="${RLFLEET_PY312:-$HOME/.pyenv/versions/3.12.1/bin/python3.12}"
    [ -x "$py312" ] || { echo "gpu-check: no Python 3.12 at $py312 (set RLFLEET_PY312)" >&2; exit 1; }
    # The CPU libtorch tree plus the wheel's CUDA libraries (linked, not
    # carried: the GPU machine has its own).
    if [ ! -f "$torch/lib/libtorch_cuda.so" ]; then
        mkdir -p "$torch/lib"
        ln -sfn "$LIBTORCH/include" "$torch/include"
        for f in "$LIBTORCH"/lib/*; do ln -sfn "$f" "$torch/lib/"; done
        unzip -q -o -j "$cache"/wheels/torch-2.11.0-*.whl torch/lib/libtorch_cuda.so \
            torch/lib/libc10_cuda.so -d "$torch/lib"
    fi
    local target="${RLFLEET_GPU_TARGET:-$cache/gpu-target}"
    # libtorch_cuda's own CUDA libraries are not here: leave them to run time.
    LIBTORCH="$torch" PYO3_PYTHON="$py312" CARGO_TARGET_DIR="$target" \
        CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols \
        RUSTFLAGS="-C link-arg=-Wl,--allow-shlib-undefined" \
        cargo build --release -p learner-server -p actor-client -p rlfleet-bench \
        --features learner-server/cuda,rlfleet-bench/cuda
    local stage
    stage="$(mktemp -d)"
    mkdir -p "$stage/lib" "$bundle"
    cp "$target"/release/{learner-server,actor-client,rlfleet-bench} "$stage/"
    cp "$ORT_DYLIB_PATH" "$stage/lib/"
    cp "$("$py312" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')/libpython3.12.so.1.0" "$stage/lib/"
    strip --strip-unneeded "$stage/lib/libpython3.12.so.1.0" || true
    rm -f "$bundle"/*.whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$bundle" \
        gymnasium==1.2.2 Farama-Notifications==0.0.6 ale-py==0.11.2
    tar -cJf "$bundle/bundle.tar.xz" -C "$stage" .
    rm -rf "$stage"
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    echo "gpu-check: $(du -sb "$bundle" | cut -f1) bytes in .gpu/ (the limit: 67108864 with the tree)"
    echo "device command: run(command=\"bash scripts/gpu-check.sh device\", carry=[\".gpu\"], timeout_s=600)"
}

device() {
    local out="${OUT:?device runs write to \$OUT}" bin=/tmp/rlfleet-gpu
    # Python envs import the carried wheels from a venv-shaped folder, and
    # numpy and OpenCV from the machine's own site-packages.
    local venv=/tmp/rlfleet-venv
    mkdir -p "$bin" "$venv/lib/python3.12/site-packages"
    tar -xJf "$bundle/bundle.tar.xz" -C "$bin"
    local python=python3
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$venv/lib/python3.12/site-packages" "$bundle"/*.whl > "$out/pip.log" 2>&1 || true
    local torch_lib home site
    torch_lib="$($python -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
    home="$($python -c 'import sys; print(sys.base_prefix)')"
    site="$($python -c 'import site; print(site.getsitepackages()[0])')"
    local libs="$torch_lib"
    # The machine's own libpython 3.12 when it has one, else the carried one.
    if ! ldconfig -p | grep -q 'libpython3.12.so.1.0' && [ ! -f "$home/lib/libpython3.12.so.1.0" ]; then
        libs="$libs:$bin/lib"
        echo "gpu-check: no libpython3.12 on this machine; using the carried one" | tee -a "$out/pip.log"
    else
        libs="$libs:$home/lib"
    fi
    LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ORT_DYLIB_PATH="$bin/lib/libonnxruntime.so.1.31.1" \
        PYTHONHOME="$home" PYTHONPATH="$site" \
        RLFLEET_PYTHON_VENV="$venv" PYTHONUNBUFFERED=1 \
        $python scripts/gpu_check.py --bin "$bin" --out "$out" --torch-python "$python" \
        --budget "${GPU_CHECK_BUDGET:-420}" --deadline "${GPU_CHECK_DEADLINE:-540}" \
        --threads 4 ${GPU_CHECK_ARGS:-}
}

dry_run() {
    . scripts/setup.sh >/dev/null
    local out="${OUT:-$(mktemp -d)}"
    [ -x target/release/rlfleet-bench ] || cargo build --release -q -p learner-server -p actor-client -p rlfleet-bench
    "$RLFLEET_PYTHON" scripts/gpu_check.py --bin target/release --out "$out" --dry-run --budget 240 --threads 1 \
        --envs-per-actor 8
    echo "gpu-check dry run: $out/gpu.json"
}

case "${1:-}" in
    build) build ;;
    device) device ;;
    --dry-run) dry_run ;;
    *) sed -n 2,23p "$0"; exit 2 ;;
esac
