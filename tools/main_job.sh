#!/usr/bin/env bash
# main_job.sh - the README's first command: set up and build, list the bundle, run the
# accuracy gate on the sample dumps in data/ (synthetic, and the logits of the 8-bit kernel's
# end-to-end run on the H200), and on a GPU machine the self-test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" "$@"
cli="$build/tools/wideattn"

echo "== bundle"
"$cli" inspect

echo "== accuracy gate on the sample dumps (data/)"
# gate_expect CANDIDATE EXPECTED_EXIT: runs the gate against the sample reference and baseline.
gate_expect() {
    local candidate=$1 expected=$2 status=0
    "$cli" accuracy gate "$root/data/sample_reference.h5" "$root/data/sample_$candidate.h5" \
        --baseline "$root/data/sample_baseline.h5" --json "$build/gate_$candidate.json" || status=$?
    if [[ $status -ne $expected ]]; then
        echo "main job: gate on sample_$candidate.h5 exited $status, expected $expected" >&2
        exit 1
    fi
}
gate_expect candidate_pass 0
gate_expect candidate_fail 1

echo "== accuracy gate on the H200 end-to-end logits (data/e2e/, first 24 tokens; rule: baseline x 1.10)"
e2e="$root/data/e2e/2026-11-29-3f5c9ad/gemma4/samples"
for variant in candidate:0 broken:1; do
    name=${variant%%:*} expected=${variant##*:} status=0
    "$cli" accuracy gate "$e2e/e2e_sample_reference.h5" "$e2e/e2e_sample_$name.h5" \
        --baseline "$e2e/e2e_sample_baseline.h5" --margin-rel 0.10 --json "$build/gate_e2e_$name.json" \
        | tail -n 3 || status=$?
    if [[ $status -ne $expected ]]; then
        echo "main job: gate on the e2e $name logits exited $status, expected $expected" >&2
        exit 1
    fi
done

echo "== selftest"
"$cli" selftest --skip-without-gpu
echo "main job: done"
