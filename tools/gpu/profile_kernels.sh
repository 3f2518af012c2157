#!/usr/bin/env bash
# profile_kernels.sh - Nsight Compute profile of the bundle's prefill kernels on one shape, for
# kernel work on the device machine (build here, carry build/):
#   tools/gpu/profile_kernels.sh [--case NAME] [--kernels wgmma_bf16c2p_d512,mma_bf16_d512,...]
# For each kernel (prefill kernel names; default: every bf16/e4m3 prefill kernel of the mma and
# Hopper tiers): the SASS of its cubin (cuobjdump), an ncu report of one launch of `wideattn
# bench --kernel NAME --cases CASE` (scheduler, warp-state, source counters) and that report's per-SASS-line
# source page as CSV (stall samples per instruction). Everything lands in $OUT (or
# ./profile_out), packed as profile.tar.gz (the device tool returns at most 8 files).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${WIDEATTN_BUILD_DIR:-$root/build}
out=${OUT:-$root/profile_out}
case_name=prompt_4k
kernels=wgmma_bf16c2p_d512,wgmma_bf16_d512,mma_bf16_d512,mma_e4m3_d512
while (($#)); do
    case "$1" in
        --case) case_name="$2"; shift ;;
        --kernels) kernels="$2"; shift ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) echo "profile_kernels: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$out/profile"
export WIDEATTN_BUNDLE="$build/bundle"
cli="$build/tools/wideattn"
[[ -x "$root/.devlibs/wideattn" ]] && cli="$root/.devlibs/wideattn"  # HDF5 libs carried (device_libs.sh)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
sections=(--section SchedulerStats --section WarpStateStats --section SourceCounters
          --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats)
for name in ${kernels//,/ }; do
    cubin=$(ls "$build/bundle/$name.sm_${arch}"*.cubin 2>/dev/null | head -1)
    [[ -z "$cubin" ]] && { echo "profile_kernels: no $name cubin for sm_$arch" >&2; continue; }
    cuobjdump -sass "$cubin" > "$out/profile/$name.sass" 2>&1
    dtypes=()
    [[ $name == *e4m3* ]] && dtypes+=(--kv-dtype e4m3)
    [[ $name == *e4m3q* ]] && dtypes+=(--q-dtype e4m3)
    echo "== ncu $name ($case_name)"
    ncu "${sections[@]}" -k "regex:wideattn_$name" -c 1 -f -o "$out/profile/$name" \
        "$cli" bench --kernel "$name" "${dtypes[@]}" --cases "$case_name" --reps 1 --warmup 0 \
        > "$out/profile/$name.ncu.txt" 2>&1
    tail -n 3 "$out/profile/$name.ncu.txt"
    ncu --import "$out/profile/$name.ncu-rep" --page details > "$out/profile/$name.details.txt" 2>&1
    ncu --import "$out/profile/$name.ncu-rep" --page source --csv --print-source sass \
        > "$out/profile/$name.source.csv" 2>&1
    grep -E "Issued Ipc|Issue Slots Busy|No Eligible|Active Warps Per|Warp Cycles Per Issued|Executed Ipc A|Duration" \
        "$out/profile/$name.details.txt" | head -20
done
tar -czf "$out/profile.tar.gz" -C "$out" profile && rm -rf "$out/profile"
echo "== profile: $out/profile.tar.gz"
