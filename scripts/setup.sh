#!/usr/bin/env bash
# scripts/setup.sh — install rlfleet's native dependencies, idempotently.
#
# Source it (`. scripts/setup.sh`) to get LIBTORCH, ORT_DYLIB_PATH,
# RLFLEET_PYTHON, RLFLEET_PYTHON_VENV, PYO3_PYTHON and LD_LIBRARY_PATH
# exported; run it to only install.
# Everything is cached under $RLFLEET_CACHE (default ~/.cache/rlfleet), outside
# the checkout, so a second run costs seconds. The recipe is the measured one
# recipe: libtorch from PyPI's torch 2.11.0 wheel,
# ONNX Runtime 1.31.1 from its wheel, OpenMPI and libclang from Debian, and a
# venv with a pinned Gymnasium for the environment parity tests.

_rlfleet_setup() {
    set -euo pipefail
    local cache="${RLFLEET_CACHE:-$HOME/.cache/rlfleet}"
    local torch_ver=2.11.0 ort_ver=1.31.1 gym_ver=1.2.2 numpy_ver=2.2.6 openapi_ver=0.7.2
    local maturin_ver=1.16.0 schemathesis_ver=4.32.5 tensorboard_ver=2.21.0 minatar_ver=1.0.15
    local wheels="$cache/wheels"
    local libtorch="$cache/libtorch-$torch_ver"
    local ortdir="$cache/onnxruntime-$ort_ver"
    local venv="$cache/venv-gymnasium-$gym_ver"
    mkdir -p "$cache" "$wheels"

    # 1. System packages (Debian): OpenMPI and libclang for the mpi feature;
    # systemd for `systemd-analyze verify` of the shipped units; Slurm and
    # munge for the test that runs slurm/single-node.sbatch under a real
    # Slurm (the test starts and stops its own daemons).
    local missing=()
    for p in libopenmpi-dev openmpi-bin libclang-dev unzip fonts-dejavu-core systemd \
        slurmctld slurmd slurm-client munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing Debian packages: ${missing[*]}" >&2
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi

    # 2. libtorch (CPU) and ONNX Runtime out of PyPI wheels.
    if [ ! -f "$libtorch/.complete" ] || [ ! -f "$ortdir/.complete" ]; then
        echo "setup: fetching torch $torch_ver and onnxruntime $ort_ver wheels (about 560 MB, once)" >&2
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
            "torch==$torch_ver" nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 \
            "onnxruntime==$ort_ver"
    fi
    if [ ! -f "$libtorch/.complete" ]; then
        local tmp="$libtorch.tmp"
        rm -rf "$tmp" && mkdir -p "$tmp"
        unzip -q -o "$wheels"/torch-$torch_ver-*.whl 'torch/include/*' 'torch/share/*' \
            torch/lib/libtorch_cpu.so torch/lib/libc10.so torch/lib/libtorch.so \
            torch/lib/libgomp.so.1 -d "$tmp"
        mv "$tmp/torch" "$tmp/libtorch"
        unzip -q -o -j "$wheels"/nvidia_cuda_runtime-*.whl 'nvidia/cu13/lib/libcudart.so.13' -d "$tmp/libtorch/lib"
        unzip -q -o -j "$wheels"/nvidia_cuda_cupti-*.whl 'nvidia/cu13/lib/libcupti.so.13' -d "$tmp/libtorch/lib"
        rm -rf "$libtorch" && mv "$tmp/libtorch" "$libtorch" && rm -rf "$tmp"
        touch "$libtorch/.complete"
    fi
    if [ ! -f "$ortdir/.complete" ]; then
        mkdir -p "$ortdir"
        unzip -q -o -j "$wheels"/onnxruntime-$ort_ver-*.whl "onnxruntime/capi/libonnxruntime.so.$ort_ver" -d "$ortdir"
        touch "$ortdir/.complete"
    fi

    # 3. Python venv with the reference Gymnasium (for parity tests).
    if [ ! -f "$venv/.complete" ]; then
        echo "setup: creating venv with gymnasium $gym_ver" >&2
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "gymnasium==$gym_ver" "numpy==$numpy_ver" "onnxruntime==$ort_ver"
        touch "$venv/.complete"
    fi
    # 3a. The environments of the Gymnasium bridge (pinned in
    # scripts/python-requirements.txt; re-run when that file changes).
    local reqs here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    reqs="$here/python-requirements.txt"
    local reqs_mark="$venv/.envs-$(sha256sum "$reqs" | cut -c1-16)"
    if [ ! -f "$reqs_mark" ]; then
        echo "setup: installing the Gymnasium bridge's environments into $venv" >&2
        "$venv/bin/pip" install -q -r "$reqs"
        rm -f "$venv"/.envs-* && touch "$reqs_mark"
    fi
    # 3a''. MinAtar's games (Gymnasium ids MinAtar/*): its wheel asks for
    # matplotlib, pandas, scipy and seaborn, which only its rendering uses;
    # the games need numpy alone.
    if [ ! -f "$venv/.minatar-$minatar_ver" ]; then
        "$venv/bin/pip" install -q --no-deps "minatar==$minatar_ver"
        rm -f "$venv"/.minatar-* && touch "$venv/.minatar-$minatar_ver"
    fi
    # 3a'. maturin, which builds the Python package (python/).
    if [ ! -f "$venv/.maturin-$maturin_ver" ]; then
        "$venv/bin/pip" install -q "maturin==$maturin_ver"
        rm -f "$venv"/.maturin-* && touch "$venv/.maturin-$maturin_ver"
    fi
    # 3b. The OpenAPI validator (for the control API's document test).
    if [ ! -f "$venv/.openapi-complete" ]; then
        "$venv/bin/pip" install -q "openapi-spec-validator==$openapi_ver"
        touch "$venv/.openapi-complete"
    fi
    # 3b'. TensorBoard, whose own reader the event-file test reads with.
    if [ ! -f "$venv/.tensorboard-$tensorboard_ver" ]; then
        "$venv/bin/pip" install -q "tensorboard==$tensorboard_ver"
        rm -f "$venv"/.tensorboard-* && touch "$venv/.tensorboard-$tensorboard_ver"
    fi

    # 3c. schemathesis, in a venv of its own (its dependencies are not the
    # envs'), for the control API's conformance test.
    local st_venv="$cache/venv-schemathesis-$schemathesis_ver"
    if [ ! -f "$st_venv/.complete" ]; then
        echo "setup: installing schemathesis $schemathesis_ver" >&2
        rm -rf "$st_venv"
        python3 -m venv "$st_venv"
        "$st_venv/bin/pip" install -q "schemathesis==$schemathesis_ver"
        touch "$st_venv/.complete"
    fi
    export RLFLEET_SCHEMATHESIS="$st_venv/bin/st"

    export LIBTORCH="$libtorch"
    export ORT_DYLIB_PATH="$ortdir/libonnxruntime.so.$ort_ver"
    export RLFLEET_PYTHON="$venv/bin/python"
    # The venv Python envs import from, and the Python pyo3 builds against.
    export RLFLEET_PYTHON_VENV="$venv"
    export PYO3_PYTHON="$venv/bin/python"
    export LD_LIBRARY_PATH="$libtorch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    _rlfleet_setup
    echo "LIBTORCH=$LIBTORCH"
    echo "ORT_DYLIB_PATH=$ORT_DYLIB_PATH"
    echo "RLFLEET_PYTHON=$RLFLEET_PYTHON"
    echo "RLFLEET_PYTHON_VENV=$RLFLEET_PYTHON_VENV"
else
    # Sourced: run in a subshell-safe way and keep the caller's shell options.
    # (A command substitution does not inherit errexit, so `set +o` inside
    # one reports it off: record it from $- here.)
    _rlfleet_saved_opts=$(set +o)
    case $- in *e*) _rlfleet_saved_opts+=$'\nset -o errexit' ;; esac
    _rlfleet_setup
    eval "$_rlfleet_saved_opts"
    unset _rlfleet_saved_opts
fi
