#!/usr/bin/env bash
# Session 8, call 5: wgmma_e4m3q_d512 with the per-step block barrier made a warpgroup barrier
# (each warpgroup converts and reads only its own dims of V), with (groupsplit) and without
# (groupbar) the one-way score exchange of the bf16 kernel, against 3e4a011 (committed).
# A/B 3 rounds; on a >= +1% gain of groupsplit on both 16k-key cases: selftest, racecheck
# --quick 1 and the e4m3-Q GPU shape list on it.
cli=.devlibs/wideattn
log=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tools/ab_bench.sh --rounds 3 --kernels wgmma_e4m3q_d512 \
  --cases prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k \
  --out $OUT/ab committed=$PWD/build/bundle groupsplit=$PWD/build-exp/e4v2 groupbar=$PWD/build-exp/e4v3
gain=$(python3 - "$OUT/ab" <<'PY'
import json, statistics, sys, glob
def med(label, case):
    v = [c["tflops"] for f in sorted(glob.glob(f"{sys.argv[1]}/{label}_*.json")) for c in json.load(open(f))["cases"]
         if c["case"] == case]
    return statistics.median(v)
print(min(med("groupsplit", c) / med("committed", c) for c in ("prompt_16k", "chunk_8k_ctx_16k")))
PY
)
echo "groupsplit/committed min ratio on 16k cases: $gain"
if python3 -c "import sys; sys.exit(0 if float('$gain') >= 1.01 else 1)"; then
  export WIDEATTN_BUNDLE=$PWD/build-exp/e4v2
  timeout 40 $cli selftest > $OUT/e4v2_selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $OUT/e4v2_selftest.txt
  timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $cli selftest --quick 1 > $OUT/e4v2_racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $OUT/e4v2_racecheck.txt
  timeout 150 build/tests/wideattn_gpu_tests -tc="gpu e4m3-Q*" > $OUT/e4v2_gpu.txt 2>&1; echo "gpu e4m3-Q tests rc=$?"; tail -3 $OUT/e4v2_gpu.txt
else
  echo "groupsplit does not gain 1%: stop"
fi
} > $log 2>&1
cd $OUT && tar czf call32.tar.gz ab e4v2_* 2>/dev/null; rm -rf ab e4v2_*
cat $log
