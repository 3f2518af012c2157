#!/usr/bin/env bash
# device_libs.sh - copies the shared libraries the `wideattn` CLI links beyond the C/C++ runtime
# (HDF5 and its dependencies) into .devlibs/ with a wrapper .devlibs/wideattn, so the CLI's
# accuracy commands run on a device machine that lacks them (carry ".devlibs" with "build").
#   tools/device_libs.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
dest="$root/.devlibs"
mkdir -p "$dest"
for lib in $(ldd "$build/tools/wideattn" | awk '/=>/ {print $3}'); do
    case $(basename "$lib") in
        libc.so*|libm.so*|libstdc++*|libgcc_s*|libresolv*|libpthread*|libdl.so*) ;;
        *) cp -L "$lib" "$dest/" ;;
    esac
done
cat > "$dest/wideattn" <<'WRAP'
#!/usr/bin/env bash
# The wideattn CLI with the libraries beside this file (device machine only).
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../build/tools/wideattn" "$@"
WRAP
chmod +x "$dest/wideattn"
grep -qx "/.devlibs/" "$root/.gitignore" || echo "device_libs: add /.devlibs/ to .gitignore" >&2
echo "device_libs: $(ls "$dest" | wc -l) files, $(du -sh "$dest" | cut -f1) in $dest"
