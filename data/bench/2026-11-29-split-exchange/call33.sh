#!/usr/bin/env bash
# Session 8, call 6: three step orders of wgmma_bf16_d512 on top of the one-way exchange
# (3e4a011 = committed): fold (softmax scale folded into exp2), late (K_j+3 refill behind the
# next score product's issue), early (partial scores posted right after the score-product wait,
# before the ring waits and the P V issue). A/B 3 rounds; the best variant on the 16k-key cases,
# if >= +1% on both: selftest, racecheck --quick 1 and the bf16 GPU shape list on it.
cli=.devlibs/wideattn
log=$OUT/log.txt
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tools/ab_bench.sh --rounds 3 --kernels wgmma_bf16_d512 \
  --cases prompt_16k,chunk_8k_ctx_16k,prompt_4k,tp4_prompt_16k \
  --out $OUT/ab committed=$PWD/build/bundle fold=$PWD/build-exp/fold late=$PWD/build-exp/late early=$PWD/build-exp/early
best=$(python3 - "$OUT/ab" <<'PY'
import json, statistics, sys, glob
def med(label, case):
    v = [c["tflops"] for f in sorted(glob.glob(f"{sys.argv[1]}/{label}_*.json")) for c in json.load(open(f))["cases"]
         if c["case"] == case]
    return statistics.median(v)
gains = {l: min(med(l, c) / med("committed", c) for c in ("prompt_16k", "chunk_8k_ctx_16k")) for l in ("fold", "late", "early")}
label = max(gains, key=gains.get)
print(label, gains[label])
PY
)
echo "best variant, min ratio on 16k cases: $best"
set -- $best
if python3 -c "import sys; sys.exit(0 if float('$2') >= 1.01 else 1)"; then
  export WIDEATTN_BUNDLE=$PWD/build-exp/$1
  timeout 40 $cli selftest > $OUT/v_selftest.txt 2>&1; echo "$1 selftest rc=$?"; tail -1 $OUT/v_selftest.txt
  timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $cli selftest --quick 1 > $OUT/v_racecheck.txt 2>&1; echo "$1 racecheck rc=$?"; tail -1 $OUT/v_racecheck.txt
  timeout 150 build/tests/wideattn_gpu_tests -tc="gpu bf16 kernels*" > $OUT/v_gpu.txt 2>&1; echo "$1 gpu bf16 tests rc=$?"; tail -3 $OUT/v_gpu.txt
else
  echo "no variant gains 1%: stop"
fi
} > $log 2>&1
cd $OUT && tar czf call33.tar.gz ab v_* 2>/dev/null; rm -rf ab v_*
cat $log
