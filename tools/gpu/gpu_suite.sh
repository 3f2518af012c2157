#!/usr/bin/env bash
# gpu_suite.sh - everything the H200 run needs (build here, carry build/), in several calls:
#   GPU test suite (in steps gpu-tests-1 .. gpu-tests-5 of whole test cases, each case's time
#   printed), selftest, compute-sanitizer (memcheck, racecheck one kernel per step, synccheck on small cases;
#   memcheck, racecheck and synccheck on small split-KV decode cases; memcheck and synccheck on
#   corrupted device metadata),
#   `wideattn bench` (the dispatcher's kernels, and every tier side by side in one process where
#   the Hopper tier is the default; the decode suite), the peer harness (PyTorch SDPA, Triton;
#   the Triton split-KV decode peer) and the end-to-end
#   drift gate of the 8-bit kernel (tools/bench/e2e_drift.py, two model layouts), the Python
#   package (tests/gpu/test_python_ops.py, tests/gpu/test_transformers_gemma4.py,
#   tests/gpu/test_transformers_k_from_v.py, the call overhead,
#   the gates on transformers' Gemma 4 code, bf16 and 8-bit) - then a summary.
#   tools/gpu/gpu_suite.sh [--no-peers] [--only-peers] [--no-sanitizer] [--no-tests] [--only-tests]
#                          [--test-steps LIST] [--list-test-steps] [--list-racecheck-steps]
#                          [--only-sanitizer] [--sanitizer-part 1|2|3] [--only-benches]
#                          [--only-e2e] [--no-e2e] [--no-python] [--only-python] [--bench-cases LIST]
#                          [--tune] [--only-tune]
# --only-sanitizer, --only-benches and --only-e2e run the compute-sanitizer steps, the bench steps
#   and the e2e drift gate alone: `--no-tests --no-peers --no-python` (the three together) ran
#   past 540 s in its bench step on 2026-12-01, too close to a call's 10 minutes.
# --only-tests runs the gpu-tests steps and the selftest alone; --test-steps LIST (step numbers and
#   `selftest`, e.g. 1,2,3 or 4,5 or selftest) runs only those of them, to share the test steps out
#   over calls; --list-test-steps prints each step's name and doctest arguments (tab-separated)
#   and exits.
# --list-racecheck-steps prints each racecheck step's kernel, the regex of its entry points and
#   the selftest's --kernels filter of the step (tab-separated; the sanitizer step instruments one
#   kernel per step, and the cluster kernels too where the step runs every kernel's checks:
#   racecheck_kernels below) and exits.
# --sanitizer-part 1|2|3 runs one third of the compute-sanitizer steps: 1 memcheck on the selftest
#   and the first half of the racecheck steps (one kernel's cases a step, in --list-racecheck-steps
#   order), 3 the other half of the racecheck steps, 2 synccheck on the selftest and the split-KV
#   and corrupted-metadata cases. Memcheck with every racecheck step took 123 s on the H200 on
#   2026-12-03 but ran past 200 s on an H100 on 2026-12-06 (23 of 38 steps done), so the racecheck
#   steps are shared out over two parts; `--only-sanitizer` is three calls.
# --tune (opt-in) adds the tuning bar after the benches: `wideattn tune --out $OUT/tuning.json`,
#   then `wideattn bench` on every case of the prefill and decode suites with that file in force
#   (WIDEATTN_TUNING; bf16, e4m3 K/V and e4m3 Q/K/V as the bundle has them), the kernels the file
#   timed side by side (`bench --kernels`, which runs a single_token kernel only on the cases of
#   one query token per sequence, as tune timed it), and tools/bench/check_tuning.py on the three
#   (check_tuning.txt / .json / .md); --only-tune runs that step alone.
# Budget: a device call is limited to 10 minutes, so run it as several calls: `--only-tests`,
# `--only-sanitizer --sanitizer-part 1`, `... 2`, `... 3`, `--only-benches`,
# `--only-e2e`, `--only-peers` (about 5-6 minutes) and `--only-python` (needs torch and transformers
# on the machine). The whole GPU test binary outgrew a call at eb22d61 (2026-12-02); on the H200 at
# 378bf33 (2026-12-04) the steps gpu-tests-1 .. 5 took 101, 79, 116, 78 and 205 s and the selftest
# 133 s (their logs print each case's time; step 5 holds the K-from-V cases), about 12 minutes
# together, so `--only-tests` no longer fits a call: run it as three calls, `--only-tests
# --test-steps 1,2,3`, `--only-tests --test-steps 4,5` and `--only-tests --test-steps selftest`.
# A step is stopped after gpu_test_step_limit seconds,
# which leaves the call the time to pack the logs. Logs and JSON go to $OUT (or gpu_suite_out/ in
# the tree), packed in $OUT/suite.tar.gz, the e2e reports in $OUT/e2e_<layout>.tar.gz; the console
# shows each step's last lines and, for a failed step, doctest's failed assertions. The e2e step
# needs the CLI's HDF5 libraries: run tools/device_libs.sh here and carry .devlibs. WIDEATTN_COMMIT
# names the commit (the device copy of the tree has no .git).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
out=${OUT:-$root/gpu_suite_out}
export WIDEATTN_BUNDLE="$build/bundle"
export PYTHONUNBUFFERED=1
cli="$build/tools/wideattn"
# The GPU test binary's steps: the doctest --test-case patterns of gpu-tests-1, gpu-tests-2, ...
# (whole test cases; no pattern holds a comma, doctest's separator), then one step for every test
# case none of them selects, a new one included. tests/gpu_suite_steps_check.py checks on the CPU
# that together they run every TEST_CASE of tests/gpu/test_gpu*.cpp exactly once.
gpu_test_patterns=(
    "gpu bf16 kernels*,gpu fp64 kernel*,gpu: *"
    "gpu e4m3 kernels*,gpu e4m3-Q kernels*"
    "gpu wgmma_e4m3pv_d512*,gpu checked mode*,gpu fp8*,gpu metadata*,gpu plans*"
    "gpu split-KV: decode*,gpu split-KV: mixed*"
)
gpu_test_step_limit=420  # seconds: a hung step still leaves the call time to pack the logs
failure_pattern=': (FATAL )?ERROR: '  # doctest's report of a failed assertion (file:line: ERROR: ...)
failure_context_before=8  # lines above it: the test case and subcase header
failure_context_after=10  # lines below it: the values, INFO / CAPTURE output
failure_lines=200         # at most this many lines of it per step
racecheck_step_limit=150  # seconds, one kernel instrumented
# racecheck_kernels: one line per kernel of the bundle (each name once), its name, its entry
# points as a regex alternation (symbol|split_symbol) and the selftest's --kernels filter of its
# step, tab-separated: a prefill kernel's own name (the selftest then runs its cases alone; the
# fp64 kernel's step ran every kernel's cases with it as their reference and was cut by the step
# limit on 2026-12-03), empty for the merge, quantise, amax and rebuild kernels (run by the others'
# checks). Those steps run every kernel's checks, so their regex also names the entry points of the
# cluster kernels (feature cta_pair): racecheck faults in a cluster kernel's distributed shared
# memory stores (st.async) when that kernel runs uninstrumented ("Internal Sanitizer Error: The
# Sanitizer failed to handle a hardware exception", an illegal address; the same in a 30-line
# cluster program; memcheck and synccheck run such kernels uninstrumented without fault; H200,
# 2026-12-05, data/bench/2026-12-05-c2-default/), and instrumented they run clean.
racecheck_kernels() {
    python3 -c '
import json, sys
kernels = json.load(open(sys.argv[1]))["kernels"]
def entries(k):
    return [e for e in (k["symbol"], k.get("split_symbol", "")) if e]
cluster = []
for k in kernels:
    if "cta_pair" in k.get("features", []):
        cluster += [e for e in entries(k) if e not in cluster]
seen = set()
for k in kernels:
    if k["name"] in seen:
        continue
    seen.add(k["name"])
    own = entries(k)
    prefill = k["kind"] == "prefill"
    names = own if prefill else own + [e for e in cluster if e not in own]
    print(k["name"] + "\t" + "|".join(names) + "\t" + (k["name"] if prefill else ""))' \
        "$build/bundle/manifest.json"
}
# gpu_test_steps: one line per step, its name and its doctest arguments, tab-separated.
gpu_test_steps() {
    local i excluded=""
    for i in "${!gpu_test_patterns[@]}"; do
        printf 'gpu-tests-%d\t--test-case=%s\t--duration=true\n' $((i + 1)) "${gpu_test_patterns[i]}"
        excluded+="${excluded:+,}${gpu_test_patterns[i]}"
    done
    printf 'gpu-tests-%d\t--test-case-exclude=%s\t--duration=true\n' $((${#gpu_test_patterns[@]} + 1)) "$excluded"
}
peers=1 sanitizer=1 tests=1 e2e=1 benches=1 python=1 tune=0 bench_cases="" test_steps="" sanitizer_part=""
while (($#)); do
    case "$1" in
        --no-peers) peers=0 ;;
        --only-peers) sanitizer=0; tests=0; e2e=0; benches=0; python=0 ;;
        --no-python) python=0 ;;
        --only-python) sanitizer=0; tests=0; e2e=0; benches=0; peers=0 ;;
        --no-sanitizer) sanitizer=0 ;;
        --no-tests) tests=0 ;;
        --only-tests) sanitizer=0; e2e=0; benches=0; python=0; peers=0 ;;
        --only-sanitizer) tests=0; e2e=0; benches=0; python=0; peers=0 ;;
        --only-benches) sanitizer=0; tests=0; e2e=0; python=0; peers=0 ;;
        --only-e2e) sanitizer=0; tests=0; benches=0; python=0; peers=0 ;;
        --test-steps) test_steps=",$2,"; shift ;;
        --sanitizer-part)
            [[ "${2:-}" == 1 || "${2:-}" == 2 || "${2:-}" == 3 ]] ||
                { echo "gpu_suite: --sanitizer-part '${2:-}' is not 1, 2 or 3" >&2; exit 2; }
            sanitizer_part=$2; shift ;;
        --list-test-steps) gpu_test_steps; exit 0 ;;
        --list-racecheck-steps) racecheck_kernels; exit ;;
        --no-e2e) e2e=0 ;;
        --bench-cases) bench_cases="$2"; shift ;;
        --tune) tune=1 ;;
        --only-tune) sanitizer=0; tests=0; e2e=0; benches=0; python=0; peers=0; tune=1 ;;
        -h|--help) sed -n '/^set -uo pipefail/q;2,$p' "$0"; exit 0 ;;
        *) echo "gpu_suite: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$out"
commit=${WIDEATTN_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
declare -a summary=() failed_steps=()
step() {  # step NAME LOGFILE COMMAND...
    local name=$1 log=$2; shift 2
    local start=$(date +%s)
    echo "== $name"
    "$@" > "$out/$log" 2>&1
    local rc=$?
    tail -n 25 "$out/$log"
    # A failed step also prints doctest's failed assertions with their test case and subcase, which
    # the tail can miss (every case prints a header under --duration=true): the console output
    # names the failure even where the archive does not come back.
    if ((rc != 0)) && grep -qE "$failure_pattern" "$out/$log"; then
        echo "-- failed assertions in $log:"
        grep -E -B "$failure_context_before" -A "$failure_context_after" "$failure_pattern" "$out/$log" |
            head -n "$failure_lines"
    fi
    summary+=("$(printf '%-12s rc=%-3s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - start ))" "$log")")
    ((rc == 0)) || failed_steps+=("$name")
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
# SM clock, power and the clock-event reasons (0x4: software power cap) every 200 ms, to tell a
# throttled run from a slow kernel; stopped before the logs are archived.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$out/clocks.csv" 2>/dev/null &
clock_log=$!
step inspect inspect.txt "$cli" inspect
if ((tests)); then
    while IFS=$'\t' read -r -a fields; do
        name=${fields[0]} number=${fields[0]##*-}
        doctest_args=("${fields[@]:1}")
        [[ -z "$test_steps" || "$test_steps" == *",$number,"* ]] || continue
        step "$name" "${name//-/_}.txt" timeout "$gpu_test_step_limit" "$build/tests/wideattn_gpu_tests" \
            "${doctest_args[@]}"
        grep -E '^[0-9]+\.[0-9]+ s: ' "$out/${name//-/_}.txt"  # each test case's time
    done < <(gpu_test_steps)
    [[ -z "$test_steps" || "$test_steps" == *",selftest,"* ]] && step selftest selftest.txt "$cli" selftest
fi
if ((sanitizer)) && command -v compute-sanitizer >/dev/null; then
    if [[ -z "$sanitizer_part" || "$sanitizer_part" == 1 ]]; then
        step memcheck memcheck.txt compute-sanitizer --tool memcheck --error-exitcode 9 "$cli" selftest --quick
    fi
    if [[ -z "$sanitizer_part" || "$sanitizer_part" == 1 || "$sanitizer_part" == 3 ]]; then
        # racecheck slows shared-memory code ~300x: one small case per kernel, and one kernel (its
        # entry points) instrumented per step, so each step is short, bounded, and its report names
        # the kernel (every kernel instrumented at once ran past 120 s on 2026-12-02). Part 1 runs
        # the first half of the steps (rounded up), part 3 the rest.
        mapfile -t race_steps < <(racecheck_kernels)
        race_half=$(((${#race_steps[@]} + 1) / 2)) race_first=0 race_end=${#race_steps[@]}
        [[ "$sanitizer_part" == 1 ]] && race_end=$race_half
        [[ "$sanitizer_part" == 3 ]] && race_first=$race_half
        for ((r = race_first; r < race_end; ++r)); do
            IFS=$'\t' read -r kernel entries filter <<< "${race_steps[r]}"
            step "racecheck-$kernel" "racecheck_$kernel.txt" timeout "$racecheck_step_limit" \
                compute-sanitizer --tool racecheck --kernel-name "regex=^($entries)\$" --error-exitcode 9 \
                "$cli" selftest --quick 1 ${filter:+--kernels "$filter"}
        done
    fi
    if [[ -z "$sanitizer_part" || "$sanitizer_part" == 2 ]]; then
        # synccheck: barrier use (the Hopper bf16 kernel's one-way exchange pairs bar.arrive with bar.sync).
        step synccheck synccheck.txt compute-sanitizer --tool synccheck --error-exitcode 9 "$cli" selftest --quick 1
        # Split-KV decode (the kernels' split path and the merge kernel, forced and automatic split
        # counts): the GPU suite's small sanitizer case (tests/gpu/test_gpu_split.cpp).
        split_case=(--test-case="gpu split-KV sanitizer*")
        step memcheck-split memcheck_split.txt compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$build/tests/wideattn_gpu_tests" "${split_case[@]}"
        step racecheck-split racecheck_split.txt compute-sanitizer --tool racecheck --error-exitcode 9 \
            "$build/tests/wideattn_gpu_tests" "${split_case[@]}"
        # synccheck: every warp of a warpgroup must execute the same wgmma instructions (the Hopper
        # kernels' split entries and the merge).
        step synccheck-split synccheck_split.txt compute-sanitizer --tool synccheck --error-exitcode 9 \
            "$build/tests/wideattn_gpu_tests" "${split_case[@]}"
        # Corrupted cu_seqlens_q, block_table and seq_lens_k (one of each class, one shape) on every
        # prefill kernel unsplit and with 7 forced splits and the merge: the GPU suite's small metadata
        # case (tests/gpu/test_gpu_metadata.cpp): 2 s under memcheck and 2 s under synccheck on the
        # H200 (2026-12-03, data/bench/2026-12-03-verify-pair-sync/suite_part2/).
        metadata_case=(--test-case="gpu metadata sanitizer*")
        step memcheck-meta memcheck_metadata.txt compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$build/tests/wideattn_gpu_tests" "${metadata_case[@]}"
        step synccheck-meta synccheck_metadata.txt compute-sanitizer --tool synccheck --error-exitcode 9 \
            "$build/tests/wideattn_gpu_tests" "${metadata_case[@]}"
    fi
fi
# bundle_has_prefill FIELD VALUE: the bundle has a prefill kernel whose manifest FIELD is VALUE.
bundle_has_prefill() {
    python3 -c '
import json, sys
kernels = json.load(open(sys.argv[1]))["kernels"]
sys.exit(0 if any(k["kind"] == "prefill" and k[sys.argv[2]] == sys.argv[3] for k in kernels) else 1)' \
        "$build/bundle/manifest.json" "$1" "$2"
}
if ((benches)); then
    bench_args=(--json "$out/bench.json" --commit "$commit")
    [[ -n "$bench_cases" ]] && bench_args+=(--cases "$bench_cases")
    step bench bench.txt "$cli" bench "${bench_args[@]}"
    # On sm_90 the dispatcher runs the Hopper tier: time both tiers (bf16 and 8-bit) side by side
    # in one process, as the performance bars are stated.
    if bundle_has_prefill name wgmma_bf16_d512; then
        tiers=mma_bf16_d512,wgmma_bf16_d512
        bundle_has_prefill name wgmma_bf16c2p_d512 && tiers+=,wgmma_bf16c2p_d512
        # The former default, a candidate since 2026-12-06, beside it where the bundle has it.
        bundle_has_prefill name wgmma_bf16c2_d512 && tiers+=,wgmma_bf16c2_d512
        bundle_has_prefill name wgmma_e4m3q_d512 && tiers+=,mma_e4m3q_d512,wgmma_e4m3q_d512
        step bench-tiers bench_tiers.txt "$cli" bench --kernels "$tiers" \
            --cases prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k --json "$out/bench_tiers.json" --commit "$commit"
    fi
    if bundle_has_prefill kv_dtype e4m3; then
        step bench-e4m3 bench_e4m3.txt "$cli" bench --kv-dtype e4m3 --json "$out/bench_e4m3.json" --commit "$commit"
        if bundle_has_prefill q_dtype e4m3; then
            step bench-e4m3q bench_e4m3q.txt "$cli" bench --kv-dtype e4m3 --q-dtype e4m3 \
                --cases prompt_16k,chunk_8k_ctx_16k --json "$out/bench_e4m3q.json" --commit "$commit"
        fi
    fi
    step bench-ref bench_reference.txt "$cli" bench --reference --cases prompt_16k --reps 1 --warmup 0 \
        --json "$out/bench_reference.json" --commit "$commit"
    # Decode and small batches (split-KV): BF16 and e4m3 K/V with the copy bandwidth of the run.
    step bench-decode bench_decode.txt "$cli" bench --suite decode --json "$out/bench_decode.json" --commit "$commit"
fi
# tune_check: the tuning bar (docs/design.md section 7). The tuning file goes to $out, not beside
# the bundle, so that no other step selects by it; the side-by-side run pins each kernel by name.
tune_check() {
    local tuning="$out/tuning.json" checker="$root/tools/bench/check_tuning.py"
    step tune tune.txt "$cli" tune --out "$tuning" || return
    local all_cases candidates
    all_cases=$("$cli" bench --list | sed 's/ (decode)$//' | paste -sd, -)
    local -a selected=() variants=("bf16")
    bundle_has_prefill kv_dtype e4m3 && variants+=("e4m3kv")
    bundle_has_prefill q_dtype e4m3 && variants+=("e4m3q")
    for variant in "${variants[@]}"; do
        local -a dtype_args=()
        [[ $variant == e4m3kv ]] && dtype_args=(--kv-dtype e4m3)
        [[ $variant == e4m3q ]] && dtype_args=(--kv-dtype e4m3 --q-dtype e4m3)
        step "tuned-$variant" "tuned_$variant.txt" env WIDEATTN_TUNING="$tuning" "$cli" bench --cases "$all_cases" \
            "${dtype_args[@]}" --json "$out/tuned_$variant.json" --commit "$commit"
        [[ -f "$out/tuned_$variant.json" ]] && selected+=("$out/tuned_$variant.json")
    done
    step tune-kernels tune_kernels.txt python3 "$checker" --tuning "$tuning" --list-candidates || return
    candidates=$(tail -n 1 "$out/tune_kernels.txt")
    step tuned-sbs tuned_side_by_side.txt env WIDEATTN_TUNING=off "$cli" bench --kernels "$candidates" \
        --cases "$all_cases" --json "$out/tuned_side_by_side.json" --commit "$commit"
    ((${#selected[@]})) || return
    step tune-check check_tuning.txt python3 "$checker" --tuning "$tuning" --selected "${selected[@]}" \
        --side-by-side "$out/tuned_side_by_side.json" --json "$out/check_tuning.json" \
        --markdown "$out/check_tuning.md"
}
((tune)) && tune_check
# e2e_meaning STATUS: what an exit status of tools/bench/e2e_drift.py means (its docstring).
e2e_meaning() {
    case "$1" in
        0) echo "candidate ACCEPTED, broken REJECTED" ;;
        1) echo "WRONG gate outcome: candidate rejected or broken accepted" ;;
        2) echo "ERROR: see the ERROR lines of the log" ;;
        3) echo "8-bit kernel not in the bundle; broken REJECTED" ;;
        4) echo "gate INCONCLUSIVE for the candidate or broken: too few tokens (tokens_needed in gate_*.json)" ;;
        124) echo "timed out" ;;
        *) echo "unexpected exit status" ;;
    esac
}
if ((e2e)); then
    # The gate's paired rule for the 8-bit kernel (docs/accuracy.md section 3): the 95 % upper
    # bound of the mean per-token KL difference candidate - baseline must lie within 0.10 x the
    # baseline's mean KL, i.e. 8-bit attention may add at most a tenth of the drift FP8 weights
    # cause. Two layouts: every layer global (the hardest case) and Gemma 4's (one global layer
    # in six, 12 layers). Each summary line names what the script's exit status means.
    e2e_cli="$cli"; [[ -x "$root/.devlibs/wideattn" ]] && e2e_cli="$root/.devlibs/wideattn"
    for layout in all_global gemma4; do
        layout_args=(); [[ $layout == gemma4 ]] && layout_args=(--layers 12 --global-every 6)
        e2e_rc=0
        step "e2e-$layout" "e2e_$layout.txt" timeout 200 python3 "$root/tools/bench/e2e_drift.py" --cli "$e2e_cli" \
            --lib "$build/dispatch/libwideattn.so" --bundle "$build/bundle" --out "$out/e2e_$layout" \
            --dump-dir "/tmp/wideattn_e2e_$layout" --margin-rel 0.10 --commit "$commit" "${layout_args[@]}" \
            || e2e_rc=$?
        summary[${#summary[@]}-1]+="  ($(e2e_meaning "$e2e_rc"))"
        tar -czf "$out/e2e_$layout.tar.gz" -C "$out" "e2e_$layout" && rm -rf "$out/e2e_$layout"
    done
fi
if ((python)); then
    # The Python package on the device: the ops (every tier, the e4m3 path, torch.compile, CUDA
    # graphs), the C++ op (wideattn.cpp_ops: built here), attn_implementation="wideattn" in transformers' Gemma 4 (gate, greedy generation,
    # continuous batching), the call overhead (bar: 15 us), and e2e_drift.py on that model.
    py_cli="$cli"; [[ -x "$root/.devlibs/wideattn" ]] && py_cli="$root/.devlibs/wideattn"
    export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
    step python-ops python_ops.txt timeout 300 python3 "$root/tests/gpu/test_python_ops.py"
    step cpp-ops cpp_ops.txt timeout 300 python3 "$root/tests/gpu/test_cpp_ops.py"
    step python-hf python_transformers.txt timeout 420 python3 "$root/tests/gpu/test_transformers_gemma4.py" \
        "$py_cli" "$out"
    # Gemma 4's global layers over a V-only cache (wideattn.v_only_cache, K rebuilt from V): the
    # paired gates against the K + V path (bf16, e4m3), greedy generation, the cache's bytes.
    step python-hf-kfv python_transformers_k_from_v.txt timeout 420 python3 \
        "$root/tests/gpu/test_transformers_k_from_v.py" "$py_cli" "$out"
    step py-overhead python_overhead.txt python3 "$root/tools/bench/python_overhead.py" --cpp-ops \
        --json "$out/python_overhead.json"
    step host-cost host_cost.txt "$build/tools/bench/wideattn_host_cost" --json "$out/host_cost.json"
    step e2e-hf e2e_hf_gemma4.txt timeout 300 python3 "$root/tools/bench/e2e_drift.py" --model transformers-gemma4 \
        --layers 12 --cli "$py_cli" --lib "$build/dispatch/libwideattn.so" --bundle "$build/bundle" \
        --out "$out/e2e_hf_gemma4" --dump-dir /tmp/wideattn_e2e_hf --margin-rel 0.10 --commit "$commit"
    [[ -d "$out/e2e_hf_gemma4" ]] && tar -czf "$out/e2e_hf_gemma4.tar.gz" -C "$out" e2e_hf_gemma4 && rm -rf "$out/e2e_hf_gemma4"
    # The 8-bit path on transformers' code (K/V quantised into an e4m3 cache with V transposed)
    # against SDPA, both on e4m3-rounded weights.
    step e2e-hf-e4m3 e2e_hf_gemma4_e4m3.txt timeout 300 python3 "$root/tools/bench/e2e_drift.py" \
        --model transformers-gemma4 --hf-e4m3 --layers 12 --cli "$py_cli" --lib "$build/dispatch/libwideattn.so" \
        --bundle "$build/bundle" --out "$out/e2e_hf_gemma4_e4m3" --dump-dir /tmp/wideattn_e2e_hf_e4m3 \
        --margin-rel 0.10 --commit "$commit"
    [[ -d "$out/e2e_hf_gemma4_e4m3" ]] && tar -czf "$out/e2e_hf_gemma4_e4m3.tar.gz" -C "$out" e2e_hf_gemma4_e4m3 &&
        rm -rf "$out/e2e_hf_gemma4_e4m3"
fi
if ((peers)); then
    # The mma.sync rate measured in this run (by the bench step, or a short bench when it did not
    # run) fills the peers' "% mma" column.
    mma_rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mma_rate_tflops_before"])' \
        "$out/bench.json" 2>/dev/null)
    [[ -z "$mma_rate" ]] && mma_rate=$("$cli" bench --cases prompt_4k --reps 1 --warmup 0 2>/dev/null |
        sed -n 's/^mma.sync bf16 register-only rate: \([0-9.]*\) TFLOP.*/\1/p' | head -1)
    peer_args=(--lib "$build/dispatch/libwideattn.so" --bundle "$build/bundle" --json "$out/peers.json" --commit "$commit")
    [[ -n "$mma_rate" && "$mma_rate" != "0" ]] && peer_args+=(--mma-rate "$mma_rate")
    step peers peers.txt timeout 420 python3 "$root/tools/bench/peer_bench.py" "${peer_args[@]}"
    step peers-decode peers_decode.txt timeout 180 python3 "$root/tools/bench/peer_bench.py" --mode decode \
        --lib "$build/dispatch/libwideattn.so" --bundle "$build/bundle" --json "$out/peers_decode.json" \
        --commit "$commit"
fi
# The device tool returns at most 8 files of at most 16 MiB: every log and JSON report in one
# archive, the two e2e archives (logit samples, several MiB each) beside it.
kill "$clock_log" 2>/dev/null
wait "$clock_log" 2>/dev/null
(cd "$out" && tar -czf suite.tar.gz $(ls *.txt *.json *.csv *.md 2>/dev/null) && rm -f ./*.txt ./*.json ./*.csv ./*.md)
echo "== summary (commit $commit)"
printf '%s\n' "${summary[@]}"
# Any failed step (a test, a sanitizer error, a bench that did not finish) fails the suite.
if ((${#failed_steps[@]})); then
    echo "gpu_suite: ${#failed_steps[@]} step(s) failed: ${failed_steps[*]}" >&2
    exit 1
fi
