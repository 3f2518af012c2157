#!/usr/bin/env python3
"""The accuracy gate on logits from the H200 end-to-end drift run: accepts the 8-bit
candidate and rejects the deliberately broken variant (P scale inverted).

The dumps are the first 24 tokens (float16) of each variant of tools/bench/e2e_drift.py's Gemma-4
layout run at commit 3f5c9ad (data/e2e/2026-11-29-3f5c9ad/gemma4/samples), gated with the rule
tools/gpu/gpu_suite.sh uses: candidate mean KL <= baseline mean KL * 1.10.
usage: e2e_gate_samples.py WIDEATTN_CLI SAMPLES_DIR
"""
import os
import subprocess
import sys
import tempfile

MARGIN_REL = "0.10"
EXPECTED = {"candidate": 0, "broken": 1}  # gate exit status: 0 accept, 1 reject


def main():
    cli, samples = sys.argv[1], sys.argv[2]
    path = lambda name: os.path.join(samples, f"e2e_sample_{name}.h5")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, expected in EXPECTED.items():
            cmd = [cli, "accuracy", "gate", path("reference"), path(name), "--baseline", path("baseline"),
                   "--margin-rel", MARGIN_REL, "--json", os.path.join(tmp, f"gate_{name}.json")]
            result = subprocess.run(cmd, capture_output=True, text=True)
            verdict = result.stdout.strip().splitlines()[-2:] if result.stdout else [result.stderr.strip()]
            ok = result.returncode == expected
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: exit {result.returncode} (expected {expected}): {' | '.join(verdict)}")
    print(f"{len(EXPECTED) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
