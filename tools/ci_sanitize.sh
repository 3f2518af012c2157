#!/usr/bin/env bash
# ci_sanitize.sh - the sanitizer job: configures a clang build with AddressSanitizer and
# UndefinedBehaviorSanitizer and the libFuzzer targets (build-asan, or $WIDEATTN_ASAN_BUILD_DIR),
# builds the tree (cubins for sm_90a only) and the three fuzzers, runs the CPU tests `cpu`,
# `fake_driver` and `metadata_model` under the sanitizers, then runs each fuzzer for $WIDEATTN_FUZZ_SECONDS (default
# 60) on its committed corpus (tests/fuzz/corpus/logit_dump, tests/fuzz/corpus/manifest; plans: none)
# from the random seed $WIDEATTN_FUZZ_SEED (default 1, so a run is repeatable: the same inputs in
# the same order, as far as the time allows; 0 lets libFuzzer pick one, for a search of new
# inputs). Exits non-zero on any failure: a failed test, a sanitizer report,
# a fuzzer crash, leak, timeout or out-of-memory (the input is kept under <build>/fuzz-artifacts/).
# Installs clang and its sanitizer runtimes (Debian packages) when they are missing.
#   tools/ci_sanitize.sh [extra meson setup options]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WIDEATTN_ASAN_BUILD_DIR:-$root/build-asan}
fuzz_seconds=${WIDEATTN_FUZZ_SECONDS:-60}
fuzz_seed=${WIDEATTN_FUZZ_SEED:-1}
# Per input: above the reader's 10 s probe of a file (docs/accuracy.md, section 8) times the
# three opens of one input, so a file that makes libhdf5 loop is refused, not a timeout.
fuzz_input_timeout_s=60
corpus=$root/tests/fuzz/corpus/logit_dump

packages=(meson ninja-build pkg-config doctest-dev libeigen3-dev libhdf5-dev clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "ci_sanitize: installing ${missing[*]}"
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

start=$(date +%s)
if [[ ! -f "$build/build.ninja" ]]; then
    # b_lundef=false: clang links the sanitizer runtimes into executables only, not shared libraries.
    CC=clang CXX=clang++ meson setup "$build" "$root" -Dtoolkit_dir="${CUDA_HOME:-/usr/local/cuda}" \
        -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true \
        -Dgpu_archs=sm_90a "$@"
fi
ninja -C "$build"
built=$(date +%s)
echo "ci_sanitize: built in $((built - start))s"

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# A library the tests dlopen must have no thread-local storage: LeakSanitizer sizes a dlopen'ed
# library's dynamic TLS block by a guess at glibc's block header, and when the allocator happens
# to place the block 16 bytes past a page boundary it reads an allocator header as that size and
# start, and its tracer thread crashes at exit ("Tracer caught signal 11"; clang 14, glibc 2.36;
# reproduced with a dlopen'ed one-line thread_local, every 64th allocation count).
if readelf -lW "$build/tests/libfake_cuda.so" | grep -qw TLS; then
    echo "ci_sanitize: tests/libfake_cuda.so has thread-local storage; LeakSanitizer cannot scan it" >&2
    exit 1
fi
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 2 cpu fake_driver metadata_model
tested=$(date +%s)
echo "ci_sanitize: the cpu, fake_driver and metadata_model tests passed under ASan/UBSan in $((tested - built))s"

# New inputs the fuzzer finds go to <build>/fuzz-corpus (kept between runs of this build
# directory); the committed corpus is only read. libhdf5's own leaks on corrupt files are
# suppressed (tests/fuzz/lsan_hdf5.supp); its large transient allocations for sizes read from a
# corrupt header are allowed (-malloc_limit_mb), its resident memory is not (-rss_limit_mb).
mkdir -p "$build/fuzz-corpus" "$build/fuzz-corpus-manifest" "$build/fuzz-artifacts"
LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan_hdf5.supp \
    "$build/accuracy/fuzz_logit_dump" -max_total_time="$fuzz_seconds" -seed="$fuzz_seed" -timeout="$fuzz_input_timeout_s" \
    -rss_limit_mb=2048 -malloc_limit_mb=1048576 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/" "$build/fuzz-corpus" "$corpus"
echo "ci_sanitize: fuzzed the dump reader for ${fuzz_seconds}s without a finding; total $(( $(date +%s) - start ))s"
"$build/tests/fuzz/fuzz_manifest" -dict="$root/tests/fuzz/manifest.dict" -max_len=8192 \
    -max_total_time="$fuzz_seconds" -seed="$fuzz_seed" -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/" \
    "$build/fuzz-corpus-manifest" "$root/tests/fuzz/corpus/manifest"
echo "ci_sanitize: fuzzed the manifest reader for ${fuzz_seconds}s without a finding; total $(( $(date +%s) - start ))s"
# Plans: programs of plan calls over fuzzed params, options, run tensors and handles, through the
# stand-in driver and the tree's bundle (no seed corpus: an empty input is already a valid program).
mkdir -p "$build/fuzz-corpus-plan"
WIDEATTN_LIBCUDA="$build/tests/libfake_cuda.so" WIDEATTN_BUNDLE="$build/bundle" \
    "$build/tests/fuzz/fuzz_plan" -max_len=512 -max_total_time="$fuzz_seconds" -seed="$fuzz_seed" -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/" "$build/fuzz-corpus-plan"
echo "ci_sanitize: fuzzed plans for ${fuzz_seconds}s without a finding; total $(( $(date +%s) - start ))s"
