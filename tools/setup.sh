#!/usr/bin/env bash
# setup.sh - installs what wideattn needs (Debian packages; idempotent, non-interactive),
# configures the Meson build in build/ (or $WIDEATTN_BUILD_DIR), builds it, and makes the build
# tree's Python package (build/python/wideattn) importable by the python3 on PATH.
#   tools/setup.sh [extra meson setup options, e.g. -Dgpu_archs=sm_90a]
set -euo pipefail

# python3-numpy and python3-h5py: tests/e2e_gate_samples.py recomputes the gate's KL with them.
# python3-torch (1.13, CPU; about 0.6 GB installed): the Python package's torch tests.
packages=(meson ninja-build pkg-config doctest-dev libeigen3-dev libhdf5-dev python3 python3-numpy python3-h5py
          python3-torch)
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

# register_python_package INTERPRETER: a .pth file naming build/python in the interpreter's
# site-packages (its user site where that is not writable), so `import wideattn` finds the build
# tree's copy (`meson install` installs the package itself instead).
register_python_package() {
    local site
    site=$("$1" - "$build/python" <<'PY'
import os, site, sys
for directory in site.getsitepackages() + [site.getusersitepackages()]:
    try:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "wideattn-build-tree.pth"), "w") as pth:
            pth.write(sys.argv[1] + "\n")
        print(directory)
        break
    except OSError:
        continue
PY
) || return 0
    [[ -n "$site" ]] && echo "setup: $1 imports wideattn from $build/python ($site/wideattn-build-tree.pth)"
}
path_python=$(command -v python3 || true)
[[ -n "$path_python" ]] && register_python_package "$path_python"
if [[ -x /usr/bin/python3 ]] && [[ "$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)" != /usr/bin/python3* ]]; then
    register_python_package /usr/bin/python3
fi
