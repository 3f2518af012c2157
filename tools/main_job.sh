#!/usr/bin/env bash
# main_job.sh - the README's first command: set up and build, list the bundle, run the
# accuracy gate on the sample dumps in data/, and on a GPU machine the self-test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" "$@"
cli="$build/tools/wideattn"

echo "== bundle"
"$cli" inspect

echo "== accuracy gate on the sample dumps (data/)"
status=0
"$cli" accuracy gate "$root/data/sample_reference.h5" "$root/data/sample_candidate_pass.h5" \
    --baseline "$root/data/sample_baseline.h5" --json "$build/gate_pass.json" || status=$?
if [[ $status -ne 0 ]]; then
    echo "main job: the passing sample candidate was not accepted (exit $status)" >&2
    exit 1
fi
status=0
"$cli" accuracy gate "$root/data/sample_reference.h5" "$root/data/sample_candidate_fail.h5" \
    --baseline "$root/data/sample_baseline.h5" --json "$build/gate_fail.json" || status=$?
if [[ $status -ne 1 ]]; then
    echo "main job: the failing sample candidate was not rejected (exit $status, expected 1)" >&2
    exit 1
fi

echo "== selftest"
"$cli" selftest --skip-without-gpu
echo "main job: done"
