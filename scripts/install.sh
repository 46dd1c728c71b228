#!/usr/bin/env bash
# scripts/install.sh — installs the built binaries where the systemd units
# expect them, with the shared libraries they load, so that a service user
# (who cannot read the building user's home) can run them.
#
#   scripts/install.sh [--prefix DIR] [--units DIR] [--link]
#
#   --prefix DIR  binaries into DIR/bin, libtorch, ONNX Runtime and (when it
#                 is not in a system folder) libpython into DIR/lib/rlfleet
#                 (default /usr/local, as the units say)
#   --units DIR   also write the systemd units there, their paths pointed at
#                 DIR/bin and DIR/lib/rlfleet (e.g. /etc/systemd/system)
#   --link        hard-link the libraries instead of copying them (same
#                 filesystem only; falls back to a copy)
#
# Run after scripts/main.sh (or cargo build --release) in the checkout, as a
# user who may write to the prefix (with LIBTORCH_VARIANT=cu130 when the
# build was, so that the CUDA libraries come). The binaries' own library search path
# points into the building user's cache; the units set LD_LIBRARY_PATH to
# DIR/lib/rlfleet instead. The manual's docs/deploying.md has the rest: the
# user, /etc/rlfleet, the certificate's names.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local units="" link=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --units) units="$2"; shift 2 ;;
        --link) link=1; shift ;;
        *) echo "usage: scripts/install.sh [--prefix DIR] [--units DIR] [--link]" >&2; exit 2 ;;
    esac
done
RLFLEET_SETUP=none . scripts/setup.sh
for bin in learner-server actor-client; do
    [ -x "target/release/$bin" ] || { echo "install: target/release/$bin is not built (scripts/main.sh builds it)" >&2; exit 1; }
done
lib="$prefix/lib/rlfleet"
install -d "$prefix/bin" "$lib"
install -m 755 target/release/learner-server target/release/actor-client "$prefix/bin/"

# A library into $lib, hard-linked when asked and possible.
put() {
    local src="$1" dst="$lib/$(basename "$1")"
    rm -f "$dst"
    if [ "$link" = 1 ] && ln "$(readlink -f "$src")" "$dst" 2>/dev/null; then
        return
    fi
    cp -L "$src" "$dst"
    chmod 644 "$dst"
}
for so in "$LIBTORCH"/lib/*.so*; do
    put "$so"
done
# A CUDA libtorch from PyTorch's wheels (LIBTORCH_VARIANT=cu130) finds its
# NVIDIA libraries beside it in site-packages; installed, they sit with it.
if [ -d "$LIBTORCH/../nvidia" ]; then
    for so in "$LIBTORCH"/../nvidia/*/lib/*.so*; do
        put "$so"
    done
fi
put "$ORT_DYLIB_PATH"
# libpython, when the loader finds it outside the system's folders (a
# pyenv Python under a home directory).
python_lib=$(ldd target/release/learner-server | awk '/libpython/ { print $3 }')
case "$python_lib" in
    "" | /usr/lib/* | /lib/*) ;;
    *) put "$python_lib" ;;
esac
chmod -R a+rX "$prefix/bin" "$lib"

if [ -n "$units" ]; then
    install -d "$units"
    ort_name=$(basename "$ORT_DYLIB_PATH")
    for unit in systemd/*.service; do
        sed -e "s|/usr/local/bin/|$prefix/bin/|g" -e "s|/usr/local/lib/rlfleet|$lib|g" \
            -e "s|$lib/libonnxruntime.so[.0-9]*|$lib/$ort_name|g" "$unit" \
            > "$units/$(basename "$unit")"
        chmod 644 "$units/$(basename "$unit")"
    done
fi
echo "install: $prefix/bin/{learner-server,actor-client}, libraries in $lib${units:+, units in $units}"
