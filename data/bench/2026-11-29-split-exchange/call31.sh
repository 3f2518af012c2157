#!/usr/bin/env bash
# Session 8, call 2: the split exchange with one barrier per (warpgroup, parity) - bf16 (build/,
# the working tree) and bf16 + e4m3-Q (build-exp/split2) - against 7f14086 (build-exp/base).
# A/B 3 rounds of both Hopper kernels; selftest + racecheck of the bf16 change; on a >= +0.4% gain
# of the e4m3-Q kernel on both 16k-key cases: its GPU shape list and racecheck.
cli=.devlibs/wideattn
log=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tools/ab_bench.sh --rounds 3 --kernels wgmma_bf16_d512,wgmma_e4m3q_d512 \
  --cases prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k \
  --out $OUT/ab base=$PWD/build-exp/base bf16split=$PWD/build/bundle bothsplit=$PWD/build-exp/split2
gain=$(python3 - "$OUT/ab" <<'PY'
import json, statistics, sys, glob
def med(label, case, kernel):
    v = [c["tflops"] for f in sorted(glob.glob(f"{sys.argv[1]}/{label}_*.json")) for c in json.load(open(f))["cases"]
         if c["case"] == case and c["kernel"] == kernel]
    return statistics.median(v)
print(min(med("bothsplit", c, "wgmma_e4m3q_d512") / med("base", c, "wgmma_e4m3q_d512") for c in ("prompt_16k", "chunk_8k_ctx_16k")))
PY
)
echo "e4m3q split/base min ratio on 16k cases: $gain"
export WIDEATTN_BUNDLE=$PWD/build/bundle
timeout 40 $cli selftest > $OUT/bf16_selftest.txt 2>&1; echo "bf16split selftest rc=$?"; tail -1 $OUT/bf16_selftest.txt
timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $cli selftest --quick 1 > $OUT/bf16_racecheck.txt 2>&1; echo "bf16split racecheck rc=$?"; tail -1 $OUT/bf16_racecheck.txt
if python3 -c "import sys; sys.exit(0 if float('$gain') >= 1.004 else 1)"; then
  export WIDEATTN_BUNDLE=$PWD/build-exp/split2
  timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $cli selftest --quick 1 > $OUT/e4_racecheck.txt 2>&1; echo "bothsplit racecheck rc=$?"; tail -1 $OUT/e4_racecheck.txt
  timeout 150 build/tests/wideattn_gpu_tests -tc="gpu e4m3-Q*" > $OUT/e4_gpu.txt 2>&1; echo "gpu e4m3-Q tests rc=$?"; tail -3 $OUT/e4_gpu.txt
else
  echo "e4m3q split does not gain 0.4%: stop"
fi
} > $log 2>&1
cd $OUT && tar czf call31.tar.gz ab bf16_* e4_* 2>/dev/null; rm -rf ab bf16_* e4_*
cat $log
