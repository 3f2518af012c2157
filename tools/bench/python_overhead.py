#!/usr/bin/env python3
"""python_overhead.py - host time of one wideattn call from Python, op call to kernel launch, on a
GPU (tools/gpu/gpu_suite.sh runs it). Gemma 4 31B global-layer shapes (32 query heads, 4 KV heads
of 512, page 16), three calls:
  decode_4x256  4 sequences, one new token each, 256 keys (the shape of the 2026-12-01 figures)
  decode_1x32k  1 sequence, one new token, 32768 keys (split-KV, with its workspace)
  prefill_16k   one 16384-token prompt
Each runs N times, timed in batches of BATCH back-to-back calls with an untimed synchronisation
between batches, so the launch queue never fills: the time per call is the host time of the
calls / N (the prefill's kernel takes milliseconds, so it runs PREFILL_CALLS calls; a figure is
flagged GPU-bound when the stream was still busy after every batch, where only a longer batch
would have shown the kernel). Consecutive calls cycle over LAYERS K/V caches (2 for the large
shapes), as a model's global layers do. Entry points:
  wideattn.prefill            the public function (argument checks once per signature, op)
  torch.ops.wideattn.prefill  the op itself (dispatcher, plan cache lookup, ctypes, launch)
  library launch              Context.launch_prefill with prebuilt params (ctypes + wideattn_prefill)
  plan.run                    Context.plan once, Plan.run per call (ctypes + wideattn_plan_run)
Bars (C API 0.4.0): wideattn.prefill <= 20 us, torch.ops <= 12 us, wideattn_prefill <= 8 us and
wideattn_plan_run <= 4 us (the last two: tools/bench/host_cost.cpp, the C calls without Python; the
library launch and plan.run rows here add ctypes). The exit status is 1 when a bar of the decode
shapes is missed.

usage: PYTHONPATH=build/python python3 tools/bench/python_overhead.py [--calls N] [--json FILE]
       [--shapes decode_4x256,decode_1x32k,prefill_16k]
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

BARS_US = {"wideattn.prefill": 20.0, "torch.ops.wideattn.prefill": 12.0}
Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 512, 16
SHAPES = {"decode_4x256": (4, 1, 256), "decode_1x32k": (1, 1, 32768), "prefill_16k": (1, 16384, 16384)}
LAYERS = 10
LARGE_CACHE_BYTES = 64 << 20   # caches larger than this: 2 of them instead of LAYERS
PREFILL_CALLS = 20
REPEATS = 5
BATCH = 50                     # calls per timed batch: far below the launch queue's depth


def setup(torch, seqs, q_len, keys):
    """The tensors of one shape: q, out, metadata, and K/V caches [num_blocks, 16, 4, 512] per layer."""
    pages = -(-keys // BLOCK)
    blocks = seqs * pages
    cache_bytes = blocks * BLOCK * KV_HEADS * HEAD_DIM * 2
    layers = LAYERS if cache_bytes <= LARGE_CACHE_BYTES else 2
    caches = [torch.randn((2, blocks, BLOCK, KV_HEADS, HEAD_DIM), device="cuda").bfloat16() for _ in range(layers)]
    table = torch.arange(blocks, dtype=torch.int32, device="cuda").reshape(seqs, pages)
    total_q = seqs * q_len
    return {"q": torch.randn((total_q, Q_HEADS, HEAD_DIM), device="cuda").bfloat16(),
            "k": [c[0] for c in caches], "v": [c[1] for c in caches], "table": table,
            "cu": torch.arange(0, total_q + 1, q_len, dtype=torch.int32, device="cuda"),
            "lens": torch.full((seqs,), keys, dtype=torch.int32, device="cuda"),
            "out": torch.empty((total_q, Q_HEADS, HEAD_DIM), device="cuda").bfloat16(),
            "q_len": q_len, "keys": keys}


def timed(torch, call, calls):
    """Median over REPEATS of the host microseconds per call of `calls` calls (call takes the
    call's index), timed in batches of at most BATCH back-to-back calls with an untimed
    synchronisation between batches, so the launch queue never fills and a kernel slower than its
    launch does not show; and whether the GPU was still busy at the end of every batch (then a
    longer batch would have become GPU-bound)."""
    samples = []
    for _ in range(REPEATS):
        host, busy = 0.0, True
        for first in range(0, calls, BATCH):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for i in range(first, min(calls, first + BATCH)):
                call(i)
            host += time.perf_counter() - start
            busy = busy and not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        samples.append((host / calls * 1e6, busy))
    return statistics.median(s for s, _ in samples), all(b for _, b in samples)


def entry_points(torch, wideattn, attention, ops, t):
    """{name: call(i)} of the four entry points over the tensors of one shape."""
    layers = len(t["k"])
    layouts = [[0, k.shape[0], BLOCK, KV_HEADS] + list(k.stride()[:3]) for k in t["k"]]
    hints = (t["q_len"], t["keys"])
    context = wideattn.default_context()
    stream = ops.current_stream(t["q"].device)
    params = []
    for k, v, layout in zip(t["k"], t["v"], layouts):
        p = ops.prefill_params(t["q"], k, v, t["cu"], t["lens"], t["table"], layout, layout, 1.0, None, None, None,
                               t["out"], None, *hints)
        params.append(p)
    workspace = ops.allocate_workspace(context.workspace_size(params[0]), t["q"].device)
    for p in params:
        ops.attach_workspace(p, workspace)
    plan = context.plan(params[0])
    pointers = [(t["q"].data_ptr(), k.data_ptr(), v.data_ptr(), t["out"].data_ptr()) for k, v in zip(t["k"], t["v"])]
    stream_handle = ctypes.c_void_p(stream)
    return {
        "wideattn.prefill": lambda i: attention.prefill(
            t["q"], t["k"][i % layers], t["v"][i % layers], t["cu"], t["lens"], t["table"], 1.0, out=t["out"],
            max_seqlen_q=hints[0], max_seqlen_k=hints[1]),
        "torch.ops.wideattn.prefill": lambda i: ops._prefill_op(
            t["q"], t["k"][i % layers], t["v"][i % layers], t["cu"], t["lens"], t["table"], layouts[i % layers],
            layouts[i % layers], 1.0, None, None, None, t["out"], None, *hints),
        "library launch": lambda i: context.launch_prefill(params[i % layers], stream_handle),
        "plan.run": lambda i: plan.run(*pointers[i % layers], None, stream),
    }, (plan, workspace)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names of SHAPES")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown or not shapes:
        parser.error(f"--shapes: unknown {unknown}; choose from {', '.join(SHAPES)}")
    import torch
    import wideattn
    from wideattn import attention, ops
    if not torch.cuda.is_available():
        print("python_overhead: no CUDA device")
        return 2
    report = {"calls": args.calls, "bars_us": BARS_US, "layers": LAYERS, "shapes": {}}
    ok = True
    for shape in shapes:
        seqs, q_len, keys = SHAPES[shape]
        t = setup(torch, seqs, q_len, keys)
        calls, keep = entry_points(torch, wideattn, attention, ops, t)
        for call in calls.values():
            for i in range(len(t["k"])):
                call(i)
        torch.cuda.synchronize()
        count = args.calls if q_len == 1 else min(args.calls, PREFILL_CALLS)
        results = {}
        print(f"{shape} ({seqs} x {keys} keys, {q_len} new token(s) per sequence; {count} calls, "
              f"{len(t['k'])} caches):")
        for name, call in calls.items():
            per_call, busy = timed(torch, call, count)
            results[name] = {"host_us_per_call": per_call, "gpu_busy_at_end": busy}
            bar = BARS_US.get(name)
            verdict = "" if bar is None else (f"  bar {bar} us: {'met' if per_call <= bar else 'MISSED'}")
            print(f"  {name:28s} {per_call:8.2f} us/call{'  (GPU busy after every batch: host time still measured)' if busy else ''}{verdict}")
            if bar is not None and q_len == 1 and per_call > bar:
                ok = False
        report["shapes"][shape] = {"sequences": seqs, "q_len": q_len, "keys": keys, "calls": count,
                                   "plan_cache": {"hits": ops.plans.hits, "misses": ops.plans.misses},
                                   "results": results}
        keep[0].close()
        del t, calls, keep
        ops.plans.clear()
        torch.cuda.empty_cache()
    print(f"bars of the decode shapes: {'met' if ok else 'missed'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
