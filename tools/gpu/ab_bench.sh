#!/usr/bin/env bash
# ab_bench.sh - A/B benchmark of kernel bundles on a GPU machine: `wideattn bench` run once per
# bundle per round, the bundles alternated for N rounds (the GPU's clocks drift between runs, so
# only alternated figures compare), then the table of tools/bench/ab_summary.py: every round's TFLOP/s
# per bundle and each bundle's median change against the first.
#   tools/gpu/ab_bench.sh [--rounds N] [--kernels LIST|auto] [--cases LIST] [--timing call|queued]
#                         [--kfv-cos-sin formula|table] [--e4m3-scale X] [--out DIR] [--cli LABEL=PATH ...]
#                         LABEL=BUNDLE_DIR ...
# --rounds N      alternated rounds (default 2)
# --kernels LIST  passed to `wideattn bench --kernels` (default wgmma_bf16c2p_d512, the BF16 prefill default);
#                 auto: no --kernels, each bundle's own choice (a variant bundle that raises a candidate's priority)
# --cases LIST    passed to `wideattn bench --cases` (default prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k)
# --timing MODE   passed to `wideattn bench --timing` (default: bench's, call; queued for calls back to back)
# --kfv-cos-sin S passed to `wideattn bench --kfv-cos-sin` (default: bench's, formula; table for the
#                 K-from-V calls with the cos / sin table)
# --e4m3-scale X  passed to `wideattn bench --e4m3-scale` (default: bench's, 2^-8; e.g. 0.0037 for the
#                 paths the 8-bit kernels take for a scale that is no power of two)
# --out DIR       where the JSON of every run and summary.md go (default: $OUT, else ./ab_bench_out)
# --cli LABEL=PATH  the `wideattn` CLI that runs LABEL's bundle, e.g. one built from the commit before
#                 a dispatcher change (the CLI links the dispatcher statically), so launch geometry,
#                 split counts and selection compare alternated as bundles do; repeatable. The
#                 other labels' CLI is .devlibs/wideattn when present (tools/device_libs.sh), else
#                 build/tools/wideattn; .devlibs/ goes on LD_LIBRARY_PATH for every CLI.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=2 kernels=wgmma_bf16c2p_d512 cases=prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k timing= kfv_cos_sin=
e4m3_scale=
out=${OUT:-$PWD/ab_bench_out}
declare -a labels dirs cli_labels cli_paths
while (($#)); do
    case $1 in
        --rounds|--kernels|--cases|--timing|--kfv-cos-sin|--e4m3-scale|--out|--cli)
            [[ $# -ge 2 && $2 != --* ]] || { echo "ab_bench: option $1 needs a value" >&2; exit 2; }
            case $1 in
                --rounds) rounds=$2 ;; --kernels) kernels=$2 ;; --cases) cases=$2 ;; --timing) timing=$2 ;;
                --kfv-cos-sin) kfv_cos_sin=$2 ;; --e4m3-scale) e4m3_scale=$2 ;; --out) out=$2 ;;
                --cli)
                    [[ $2 == ?*=?* ]] || { echo "ab_bench: --cli '$2' is not LABEL=PATH" >&2; exit 2; }
                    cli_labels+=("${2%%=*}"); cli_paths+=("${2#*=}") ;;
            esac
            shift ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *=*) labels+=("${1%%=*}"); dirs+=("${1#*=}") ;;
        *) echo "ab_bench: argument '$1' is not LABEL=BUNDLE_DIR (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ab_bench: --rounds='$rounds' is not an integer >= 1" >&2; exit 2; }
[[ -z $timing || $timing == call || $timing == queued ]] ||
    { echo "ab_bench: --timing='$timing' is not call or queued" >&2; exit 2; }
[[ -z $kfv_cos_sin || $kfv_cos_sin == formula || $kfv_cos_sin == table ]] ||
    { echo "ab_bench: --kfv-cos-sin='$kfv_cos_sin' is not formula or table" >&2; exit 2; }
[[ -z $e4m3_scale || $e4m3_scale =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] ||
    { echo "ab_bench: --e4m3-scale='$e4m3_scale' is not a positive decimal number" >&2; exit 2; }
bench_args=(--cases "$cases")
[[ $kernels == auto ]] || bench_args+=(--kernels "$kernels")
[[ -z $timing ]] || bench_args+=(--timing "$timing")
[[ -z $kfv_cos_sin ]] || bench_args+=(--kfv-cos-sin "$kfv_cos_sin")
[[ -z $e4m3_scale ]] || bench_args+=(--e4m3-scale "$e4m3_scale")
((${#labels[@]} >= 2)) || { echo "ab_bench: give at least two LABEL=BUNDLE_DIR" >&2; exit 2; }
for i in "${!dirs[@]}"; do
    [[ -f ${dirs[$i]}/manifest.json ]] || { echo "ab_bench: ${labels[$i]}=${dirs[$i]} has no manifest.json" >&2; exit 2; }
done
cli=$root/build/tools/wideattn
[[ -x $root/.devlibs/wideattn ]] && cli=$root/.devlibs/wideattn
[[ -d $root/.devlibs ]] && export LD_LIBRARY_PATH=$root/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
declare -A clis
for i in "${!labels[@]}"; do clis[${labels[$i]}]=$cli; done
for i in "${!cli_labels[@]}"; do
    [[ -n ${clis[${cli_labels[$i]}]+set} ]] ||
        { echo "ab_bench: --cli ${cli_labels[$i]}=...: no LABEL=BUNDLE_DIR has the label '${cli_labels[$i]}'" >&2; exit 2; }
    [[ -f ${cli_paths[$i]} && -x ${cli_paths[$i]} ]] ||
        { echo "ab_bench: --cli ${cli_labels[$i]}=${cli_paths[$i]} is not an executable file" >&2; exit 2; }
    clis[${cli_labels[$i]}]=${cli_paths[$i]}
done
mkdir -p "$out"
declare -A files
for ((r = 1; r <= rounds; ++r)); do
    for i in "${!labels[@]}"; do
        json="$out/${labels[$i]}_$r.json"
        start=$(date +%s)
        if ! WIDEATTN_BUNDLE=${dirs[$i]} "${clis[${labels[$i]}]}" bench "${bench_args[@]}" --json "$json" \
            > "$out/${labels[$i]}_$r.txt" 2>&1; then
            echo "ab_bench: bench failed for ${labels[$i]} (round $r):" >&2
            tail -3 "$out/${labels[$i]}_$r.txt" >&2
            exit 1
        fi
        echo "round $r/${rounds}: ${labels[$i]} ($(( $(date +%s) - start )) s)"
        files[${labels[$i]}]+="${files[${labels[$i]}]:+,}$json"
    done
done
args=()
for label in "${labels[@]}"; do args+=("$label=${files[$label]}"); done
[[ $kernels == auto ]] && args+=(--by-case)
python3 "$root/tools/bench/ab_summary.py" "${args[@]}" | tee "$out/summary.md"
