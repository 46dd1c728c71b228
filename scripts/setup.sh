#!/usr/bin/env bash
# scripts/setup.sh — install rlfleet's native dependencies, idempotently.
#
# Source it (`. scripts/setup.sh`) to get LIBTORCH, ORT_DYLIB_PATH,
# RLFLEET_PYTHON, RLFLEET_PYTHON_VENV, PYO3_PYTHON and LD_LIBRARY_PATH
# exported; run it to only install.
# Everything is cached under $RLFLEET_CACHE (default ~/.cache/rlfleet), outside
# the checkout, so a second run costs seconds. The recipe: libtorch from
# PyPI's torch 2.11.0 wheel, ONNX Runtime 1.31.1 from its wheel, a few
# Debian packages, and a venv with a pinned Gymnasium and the environments
# the shipped configs use.
#
# RLFLEET_SETUP says how much:
#   run   (default) what building and running rlfleet needs;
#   test  that and what only the test suite uses: OpenMPI and libclang
#         (the `mpi` build), Slurm, munge and systemd's tools, schemathesis,
#         the OpenAPI validator, TensorBoard's reader, maturin, mypy
#         (scripts/test.sh sets it);
#   none  install nothing: take LIBTORCH, ORT_DYLIB_PATH and
#         RLFLEET_PYTHON_VENV from the environment (as a cluster's
#         `module load` sets them) or from the cache, and say what is
#         missing (the sbatch scripts use it).
# Debian packages are installed only by root, with apt-get; anyone else is
# told which are missing and the command that installs them, and the
# set-up stops (it never calls sudo). RLFLEET_SETUP_PACKAGES replaces the
# list of Debian packages required (for an image whose names differ).
#
# LIBTORCH_VARIANT says which libtorch LIBTORCH names:
#   cpu    (default) the CPU libraries out of the torch wheel (about 490 MB);
#   cu130  the CUDA 13 build, as PyTorch ships it: torch 2.11.0 with its
#          NVIDIA library wheels in a venv of the cache (about 4.7 GB, once;
#          scripts/torch-venv.sh shares it). Build with
#          `--features learner-server/cuda` (scripts/main.sh adds it) so
#          that the binaries load libtorch_cuda and train on the GPU.
# Switching variants in one target folder rebuilds torch-sys and what
# links it (a few minutes).

_rlfleet_setup() {
    set -euo pipefail
    local mode="${RLFLEET_SETUP:-run}"
    case "$mode" in
        run | test | none) ;;
        *) echo "setup: RLFLEET_SETUP=$mode: use run, test or none" >&2; return 2 ;;
    esac
    local variant="${LIBTORCH_VARIANT:-cpu}"
    case "$variant" in
        cpu | cu130) ;;
        *) echo "setup: LIBTORCH_VARIANT=$variant: use cpu or cu130" >&2; return 2 ;;
    esac
    local cache="${RLFLEET_CACHE:-$HOME/.cache/rlfleet}"
    local torch_ver=2.11.0 ort_ver=1.31.1 gym_ver=1.2.2 numpy_ver=2.2.6 openapi_ver=0.7.2
    local maturin_ver=1.16.0 schemathesis_ver=4.32.5 tensorboard_ver=2.21.0 minatar_ver=1.0.15
    local mypy_ver=1.18.2
    local wheels="$cache/wheels"
    # The CPU tree (also the base of scripts/gpu-check.sh's build), and the
    # libtorch LIBTORCH names: that tree, or the CUDA venv's.
    local cpu_torch="$cache/libtorch-$torch_ver"
    local tvenv="$cache/venv-torch-$torch_ver"
    local libtorch="$cpu_torch"
    [ "$variant" = cu130 ] && libtorch="$(echo "$tvenv"/lib/python3*/site-packages/torch)"
    local ortdir="$cache/onnxruntime-$ort_ver"
    local venv="$cache/venv-gymnasium-$gym_ver"

    if [ "$mode" = none ]; then
        _rlfleet_use_what_is_there "$libtorch" "$ortdir/libonnxruntime.so.$ort_ver" "$venv"
        return
    fi

    # 1. System packages (Debian): unzip to unpack the wheels, fonts for
    # the learning-curve PNG; for the tests also OpenMPI and libclang (the
    # `mpi` feature), systemd for `systemd-analyze verify` of the shipped
    # units, Slurm and munge for the tests that run the sbatch scripts
    # under a real Slurm (the tests start and stop their own daemons).
    local packages=(unzip fonts-dejavu-core)
    [ "$mode" = test ] && packages+=(libopenmpi-dev openmpi-bin libclang-dev systemd \
        slurmctld slurmd slurm-client munge)
    [ -n "${RLFLEET_SETUP_PACKAGES:-}" ] && read -r -a packages <<< "$RLFLEET_SETUP_PACKAGES"
    local missing=()
    if command -v dpkg-query >/dev/null; then
        for p in "${packages[@]}"; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
        done
    elif ! command -v unzip >/dev/null; then
        missing+=(unzip)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            echo "setup: installing Debian packages: ${missing[*]}" >&2
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        else
            echo "setup: missing: ${missing[*]}" >&2
            if command -v apt-get >/dev/null; then
                echo "setup: install them as root (apt-get install ${missing[*]}), then run this again" >&2
            else
                echo "setup: this is not a Debian system: install their equivalents, then run this again" >&2
            fi
            return 1
        fi
    fi

    mkdir -p "$cache" "$wheels"

    # 2. libtorch (CPU) and ONNX Runtime out of PyPI wheels.
    if [ ! -f "$cpu_torch/.complete" ] || [ ! -f "$ortdir/.complete" ]; then
        echo "setup: fetching torch $torch_ver and onnxruntime $ort_ver wheels (about 560 MB, once)" >&2
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
            "torch==$torch_ver" nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 \
            "onnxruntime==$ort_ver"
    fi
    if [ ! -f "$cpu_torch/.complete" ]; then
        local tmp="$cpu_torch.tmp"
        rm -rf "$tmp" && mkdir -p "$tmp"
        unzip -q -o "$wheels"/torch-$torch_ver-*.whl 'torch/include/*' 'torch/share/*' \
            torch/lib/libtorch_cpu.so torch/lib/libc10.so torch/lib/libtorch.so \
            torch/lib/libgomp.so.1 -d "$tmp"
        mv "$tmp/torch" "$tmp/libtorch"
        unzip -q -o -j "$wheels"/nvidia_cuda_runtime-*.whl 'nvidia/cu13/lib/libcudart.so.13' -d "$tmp/libtorch/lib"
        unzip -q -o -j "$wheels"/nvidia_cuda_cupti-*.whl 'nvidia/cu13/lib/libcupti.so.13' -d "$tmp/libtorch/lib"
        rm -rf "$cpu_torch" && mv "$tmp/libtorch" "$cpu_torch" && rm -rf "$tmp"
        touch "$cpu_torch/.complete"
    fi
    if [ ! -f "$ortdir/.complete" ]; then
        mkdir -p "$ortdir"
        unzip -q -o -j "$wheels"/onnxruntime-$ort_ver-*.whl "onnxruntime/capi/libonnxruntime.so.$ort_ver" -d "$ortdir"
        touch "$ortdir/.complete"
    fi
    # 2'. LIBTORCH_VARIANT=cu130: the whole CUDA torch, whose libraries find
    # their NVIDIA ones beside them in the venv (their RUNPATH says where).
    if [ "$variant" = cu130 ]; then
        if [ ! -f "$tvenv/.complete" ]; then
            echo "setup: installing torch $torch_ver with its CUDA 13 libraries (about 4.7 GB, once)" >&2
            rm -rf "$tvenv"
            python3 -m venv "$tvenv"
            "$tvenv/bin/pip" install -q "torch==$torch_ver" "numpy==$numpy_ver"
            touch "$tvenv/.complete"
        fi
        libtorch="$(echo "$tvenv"/lib/python3*/site-packages/torch)"
        [ -f "$libtorch/lib/libtorch_cuda.so" ] || {
            echo "setup: $tvenv holds no libtorch_cuda.so: remove it and run again" >&2
            return 1
        }
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
    # 3a'. The test suite's tools (RLFLEET_SETUP=test): maturin, which
    # builds the Python package (python/).
    if [ "$mode" = test ] && [ ! -f "$venv/.maturin-$maturin_ver" ]; then
        "$venv/bin/pip" install -q "maturin==$maturin_ver"
        rm -f "$venv"/.maturin-* && touch "$venv/.maturin-$maturin_ver"
    fi
    # 3b. The OpenAPI validator (for the control API's document test).
    if [ "$mode" = test ] && [ ! -f "$venv/.openapi-complete" ]; then
        "$venv/bin/pip" install -q "openapi-spec-validator==$openapi_ver"
        touch "$venv/.openapi-complete"
    fi
    # 3b'. TensorBoard, whose own reader the event-file test reads with.
    if [ "$mode" = test ] && [ ! -f "$venv/.tensorboard-$tensorboard_ver" ]; then
        "$venv/bin/pip" install -q "tensorboard==$tensorboard_ver"
        rm -f "$venv"/.tensorboard-* && touch "$venv/.tensorboard-$tensorboard_ver"
    fi

    # 3b''. mypy, which checks the Python package's stubs.
    if [ "$mode" = test ] && [ ! -f "$venv/.mypy-$mypy_ver" ]; then
        "$venv/bin/pip" install -q "mypy==$mypy_ver"
        rm -f "$venv"/.mypy-* && touch "$venv/.mypy-$mypy_ver"
    fi

    # 3c. schemathesis, in a venv of its own (its dependencies are not the
    # envs'), for the control API's conformance test.
    local st_venv="$cache/venv-schemathesis-$schemathesis_ver"
    if [ "$mode" = test ] && [ ! -f "$st_venv/.complete" ]; then
        echo "setup: installing schemathesis $schemathesis_ver" >&2
        rm -rf "$st_venv"
        python3 -m venv "$st_venv"
        "$st_venv/bin/pip" install -q "schemathesis==$schemathesis_ver"
        touch "$st_venv/.complete"
    fi
    [ -f "$st_venv/.complete" ] && export RLFLEET_SCHEMATHESIS="$st_venv/bin/st"

    export LIBTORCH="$libtorch"
    export ORT_DYLIB_PATH="$ortdir/libonnxruntime.so.$ort_ver"
    export RLFLEET_PYTHON="$venv/bin/python"
    # The venv Python envs import from, and the Python pyo3 builds against.
    export RLFLEET_PYTHON_VENV="$venv"
    export PYO3_PYTHON="$venv/bin/python"
    export LD_LIBRARY_PATH="$libtorch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# RLFLEET_SETUP=none: LIBTORCH, ORT_DYLIB_PATH and RLFLEET_PYTHON_VENV as
# the environment gives them, else the cache's; what is in neither is named.
_rlfleet_use_what_is_there() {
    local libtorch="${LIBTORCH:-$1}" ort="${ORT_DYLIB_PATH:-$2}" venv="${RLFLEET_PYTHON_VENV:-$3}"
    local missing=()
    [ -f "$libtorch/lib/libtorch_cpu.so" ] || missing+=("libtorch (LIBTORCH=$libtorch)")
    [ -f "$ort" ] || missing+=("ONNX Runtime (ORT_DYLIB_PATH=$ort)")
    [ -x "$venv/bin/python" ] || missing+=("the Python venv (RLFLEET_PYTHON_VENV=$venv)")
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: RLFLEET_SETUP=none installs nothing, and these are missing: ${missing[*]}" >&2
        echo "setup: load the modules that provide them, set those variables, or run scripts/setup.sh where it can install" >&2
        return 1
    fi
    export LIBTORCH="$libtorch" ORT_DYLIB_PATH="$ort" RLFLEET_PYTHON_VENV="$venv"
    export RLFLEET_PYTHON="$venv/bin/python" PYO3_PYTHON="$venv/bin/python"
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
