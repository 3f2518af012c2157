#!/usr/bin/env python3
"""python_overhead.py - host time of one wideattn call from Python, op call to kernel launch, on a
GPU (tools/gpu/gpu_suite.sh runs it; the bar: <= 15 us). A small decode call (4 sequences, one new
token each, 256 keys; Gemma 4 31B global-layer shapes) runs N times back to back without
synchronising, so the loop is bound by the host: the time per call is the loop's wall time / N.
Should the GPU still be busy at the end, the loop was bound by the kernels and the figure is an
upper bound of the host time. Three entry points:
  wideattn.prefill            the public function (argument checks, output given, op)
  torch.ops.wideattn.prefill  the op itself (dispatcher, parameter struct, ctypes, launch)
  library launch              Context.launch_prefill with prebuilt params (ctypes + wideattn_prefill)

usage: PYTHONPATH=build/python python3 tools/bench/python_overhead.py [--calls N] [--json FILE]
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

BAR_US = 15.0
Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 512, 16
SEQS, KEYS = 4, 256
REPEATS = 5


def setup(torch):
    pages = KEYS // BLOCK
    cache = torch.randn((2, SEQS * pages, BLOCK, KV_HEADS, HEAD_DIM), device="cuda").bfloat16()
    table = torch.arange(SEQS * pages, dtype=torch.int32, device="cuda").reshape(SEQS, pages)
    return {"q": torch.randn((SEQS, Q_HEADS, HEAD_DIM), device="cuda").bfloat16(),
            "k": cache[0], "v": cache[1], "table": table,
            "cu": torch.arange(SEQS + 1, dtype=torch.int32, device="cuda"),
            "lens": torch.full((SEQS,), KEYS, dtype=torch.int32, device="cuda"),
            "out": torch.empty((SEQS, Q_HEADS, HEAD_DIM), device="cuda").bfloat16()}


def timed(torch, call, calls):
    """Median over REPEATS of the host microseconds per call of `calls` back-to-back calls."""
    samples = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        host = time.perf_counter() - start
        busy = not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        samples.append((host / calls * 1e6, busy))
    return statistics.median(s for s, _ in samples), all(b for _, b in samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import wideattn
    from wideattn import attention, ops
    if not torch.cuda.is_available():
        print("python_overhead: no CUDA device")
        return 2
    t = setup(torch)
    layout = [0, t["k"].shape[0], BLOCK, KV_HEADS] + list(t["k"].stride()[:3])
    context = wideattn.default_context()
    params = ops.prefill_params(t["q"], t["k"], t["v"], t["cu"], t["lens"], t["table"], layout, layout, 1.0,
                                None, None, None, t["out"], None)
    stream = ops.current_stream(t["q"].device)
    calls = {
        "wideattn.prefill": lambda: attention.prefill(t["q"], t["k"], t["v"], t["cu"], t["lens"], t["table"], 1.0,
                                                      out=t["out"]),
        "torch.ops.wideattn.prefill": lambda: ops._prefill_op(t["q"], t["k"], t["v"], t["cu"], t["lens"], t["table"],
                                                              layout, layout, 1.0, None, None, None, t["out"], None),
        "library launch": lambda: context.launch_prefill(params, ctypes.c_void_p(stream)),
    }
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    report = {"calls": args.calls, "bar_us": BAR_US, "sequences": SEQS, "keys": KEYS, "results": {}}
    for name, call in calls.items():
        per_call, busy = timed(torch, call, args.calls)
        report["results"][name] = {"host_us_per_call": per_call, "gpu_busy_at_end": busy}
        print(f"{name:28s} {per_call:8.2f} us/call{'  (GPU-bound: an upper bound)' if busy else ''}")
    ok = report["results"]["wideattn.prefill"]["host_us_per_call"] <= BAR_US
    print(f"bar: wideattn.prefill {'<=' if ok else '>'} {BAR_US} us per call")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
