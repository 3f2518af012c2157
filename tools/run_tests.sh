#!/usr/bin/env bash
# run_tests.sh - the README's test command: builds if needed and runs every test suite
# (the GPU suite reports 'skipped' where no GPU is present). Ends with "N passed, N failed",
# counting doctest cases and the script tests; exits non-zero on any failure.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
if [[ ! -f "$build/build.ninja" ]]; then
    "$root/tools/setup.sh" || exit 1
fi
ninja -C "$build" || { echo "0 passed, 1 failed"; exit 1; }
meson test -C "$build" --print-errorlogs --num-processes 2
rc=$?
python3 "$root/tools/build/count_results.py" "$build/meson-logs/testlog.json" || rc=1
exit $rc
