#!/usr/bin/env bash
# setup.sh - installs what wideattn needs (Debian packages; idempotent, non-interactive),
# configures the Meson build in build/ (or $WIDEATTN_BUILD_DIR) and builds it.
#   tools/setup.sh [extra meson setup options, e.g. -Dgpu_archs=sm_90a]
set -euo pipefail

# python3-numpy and python3-h5py: tests/e2e_gate_samples.py recomputes the gate's KL with them.
packages=(meson ninja-build pkg-config doctest-dev libeigen3-dev libhdf5-dev python3 python3-numpy python3-h5py)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

toolkit=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x "$toolkit/bin/nvcc" ]]; then
    echo "setup: nvcc not found at $toolkit/bin/nvcc (install the CUDA toolkit or set CUDA_HOME)" >&2
    exit 1
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
if [[ -f "$build/build.ninja" ]]; then
    meson configure "$build" -Dtoolkit_dir="$toolkit" "$@" >/dev/null
else
    meson setup "$build" "$root" -Dtoolkit_dir="$toolkit" "$@"
fi
start=$(date +%s)
ninja -C "$build"
echo "setup: built $build in $(( $(date +%s) - start ))s"
