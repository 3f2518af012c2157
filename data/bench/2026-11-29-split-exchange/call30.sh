#!/usr/bin/env bash
# Session 8, call 1: wgmma_bf16_d512 with the score exchange split into bar.arrive (post) and
# bar.sync (collect) per warpgroup, refills between (experiments/split_exchange_barrier.patch).
# A/B 3 rounds against the committed bundle; on a >= +0.4% gain on both 16k-key cases: selftest,
# racecheck --quick 1 and the bf16 GPU shape list on the variant.
cli=.devlibs/wideattn
log=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tools/ab_bench.sh --rounds 3 --kernels wgmma_bf16_d512 \
  --cases prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k \
  --out $OUT/ab committed=$PWD/build/bundle split=$PWD/build-exp/split
gain=$(python3 - "$OUT/ab" <<'PY'
import json, statistics, sys, glob
def med(label, case):
    v = [c["tflops"] for f in sorted(glob.glob(f"{sys.argv[1]}/{label}_*.json")) for c in json.load(open(f))["cases"]
         if c["case"] == case]
    return statistics.median(v)
print(min(med("split", c) / med("committed", c) for c in ("prompt_16k", "chunk_8k_ctx_16k")))
PY
)
echo "split/committed min ratio on 16k cases: $gain"
if python3 -c "import sys; sys.exit(0 if float('$gain') >= 1.004 else 1)"; then
  export WIDEATTN_BUNDLE=$PWD/build-exp/split
  timeout 40 $cli selftest > $OUT/split_selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $OUT/split_selftest.txt
  timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $cli selftest --quick 1 > $OUT/split_racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $OUT/split_racecheck.txt
  timeout 150 build/tests/wideattn_gpu_tests -tc="gpu bf16 kernels*" > $OUT/split_gpu_bf16.txt 2>&1; echo "gpu bf16 tests rc=$?"; tail -3 $OUT/split_gpu_bf16.txt
else
  echo "split does not gain 0.4%: stop"
fi
} > $log 2>&1
cd $OUT && tar czf call30.tar.gz ab split_* 2>/dev/null; rm -rf ab split_*
cat $log
