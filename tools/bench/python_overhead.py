#!/usr/bin/env python3
"""python_overhead.py - host time of one wideattn call from Python, op call to kernel launch, on a
GPU (tools/gpu/gpu_suite.sh runs it), each layer of the Python stack timed on its own so that the
cost of a call can be attributed. Gemma 4 31B global-layer shapes (32 query heads, 4 KV heads of
512, page 16), three calls:
  decode_4x256  4 sequences, one new token each, 256 keys (the shape of the 2026-12-01 figures)
  decode_1x32k  1 sequence, one new token, 32768 keys (split-KV, with its workspace)
  prefill_16k   one 16384-token prompt
Each runs N times, timed in batches of BATCH back-to-back calls with an untimed synchronisation
between batches, so the launch queue never fills: the time per call is the host time of the
calls / N (the prefill's kernel takes milliseconds, so it runs PREFILL_CALLS calls; a figure is
flagged GPU-bound when the stream was still busy after every batch, where only a longer batch
would have shown the kernel). Consecutive calls cycle over LAYERS K/V caches (2 for the large
shapes), as a model's global layers do. Entry points, from the top of the stack down (each row
contains the ones below it that it names):
  wideattn.prefill            the public function: the signature lookup (argument checks once
                              per signature), then torch.ops.wideattn.prefill_packed (the calls
                              here have no lse and no scales)
  torch.ops.wideattn.prefill  the op: torch's dispatcher, then ops._prefill_cuda
  torch.ops.wideattn.prefill_packed  the same call through the op of the smaller schema (layouts,
                              hints, splits and flags in one int list): dispatcher, then
                              ops._prefill_cuda
  dispatcher (no-op op)       an op of wideattn::prefill's schema whose CUDA implementation does
                              nothing: what torch's dispatcher costs with these arguments
  dispatcher (no-op packed op)  the same for wideattn::prefill_packed's schema
  ops._prefill_cuda           the op's CUDA implementation called directly: CUDA state, plan
                              key and lookup, then Plan.run
  plan key + lookup           ops.plan_key and the PlanCache lookup alone (no launch)
  library launch              Context.launch_prefill with prebuilt params (ctypes + wideattn_prefill)
  plan.run                    Context.plan once, Plan.run per call (ctypes + wideattn_plan_run)
  torch.ops.wideattn_cpp.prefill_packed  with --cpp-ops: the C++ op (wideattn.cpp_ops, loaded
                              first: built the first time, its build time printed), whose CUDA path
                              keys, looks up and runs the plan in C++; wideattn.prefill then calls
                              it in place of torch.ops.wideattn.prefill_packed (that row still
                              times the Python op)
and, where transformers is importable, the transformers integration on the same shapes as
[B, H, T, D] tensors (B sequences of T new tokens over S keys; K/V [B, 4, S, 512] per layer):
  hf layer                    wideattn.transformers.attention_forward of a served layer whose
                              step metadata is shared (the step's layers after the first; no mask)
  hf decode step / layer      decode shapes: whole steps of LAYERS served layers, the key count
                              growing by one per step as in generation, K/V views into larger
                              buffers (a static cache's form), per layer: the step's metadata is
                              written once per step into persistent buffers and the plan is made
                              again only when the key count passes its capacity bucket
                              (wideattn.transformers.key_capacity), so "N plans made" should read
                              1-2 for a run whose steps stay within one or two buckets
  hf decode step, new K/V     the same with new exact K/V tensors [B, 4, S, 512] at every step and
                              layer (torch.empty: what a DynamicCache's torch.cat gives, its
                              allocation included in the time): the head stride changes every
                              step, the plan is reused all the same (1-2 plans made)
  hf step, 4-D mask (MODE)    decode shapes: steps whose causal mask [B, 1, 1, S] transformers'
                              create_causal_mask would build (wideattn.transformers.build_mask,
                              no padding), then LAYERS served layers, per layer: MODE "auto"
                              (the default rule: a mask of causal form by construction is not
                              verified) and "per_step" (every mask verified on the host at the
                              step's first layer: one synchronisation per step), alternated
  hf sliding layer            attention_forward of a 256-dim sliding-window layer (handed to
                              transformers' SDPA function), and
  sdpa_attention_forward      transformers' SDPA function on the same tensors, called directly:
                              the difference is what wideattn.transformers adds to the 5 of 6
                              Gemma 4 layers it does not serve
Bars (C API 0.4.0): wideattn.prefill <= 20 us, torch.ops <= 12 us, wideattn_prefill <= 8 us and
wideattn_plan_run <= 4 us (the last two: tools/bench/host_cost.cpp, the C calls without Python; the
library launch and plan.run rows here add ctypes). The exit status is 1 when a bar of the decode
shapes is missed.

usage: PYTHONPATH=build/python python3 tools/bench/python_overhead.py [--calls N] [--json FILE]
       [--shapes decode_4x256,decode_1x32k,prefill_16k] [--no-transformers]
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

BARS_US = {"wideattn.prefill": 20.0, "torch.ops.wideattn.prefill": 12.0, "torch.ops.wideattn_cpp.prefill_packed": 12.0}
Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 512, 16
SLIDING_KV_HEADS, SLIDING_HEAD_DIM, SLIDING_WINDOW = 16, 256, 1024
SHAPES = {"decode_4x256": (4, 1, 256), "decode_1x32k": (1, 1, 32768), "prefill_16k": (1, 16384, 16384)}
LAYERS = 10
LARGE_CACHE_BYTES = 64 << 20   # caches larger than this: 2 of them instead of LAYERS
PREFILL_CALLS = 20
REPEATS = 5
BATCH = 50                     # calls per timed batch: far below the launch queue's depth
NOOP_NAMESPACE = "wideattn_overhead"


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
            "q_len": q_len, "keys": keys, "seqs": seqs}


def timed(torch, call, calls, per_call=1):
    """Median over REPEATS of the host microseconds per call of `calls` calls (call takes the
    call's index and makes `per_call` calls of what is reported), timed in batches of at most
    BATCH back-to-back calls with an untimed synchronisation between batches, so the launch queue
    never fills and a kernel slower than its launch does not show; and whether the GPU was still
    busy at the end of every batch (then a longer batch would have become GPU-bound)."""
    samples = []
    batch = max(1, BATCH // per_call)
    for _ in range(REPEATS):
        host, busy = 0.0, True
        for first in range(0, calls, batch):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for i in range(first, min(calls, first + batch)):
                call(i)
            host += time.perf_counter() - start
            busy = busy and not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        samples.append((host / (calls * per_call) * 1e6, busy))
    return statistics.median(s for s, _ in samples), all(b for _, b in samples)


def noop_op(torch, ops):
    """Ops of wideattn::prefill's and wideattn::prefill_packed's schemas under NOOP_NAMESPACE whose
    CUDA implementations do nothing: (library, {name: op})."""
    library = torch.library.Library(NOOP_NAMESPACE, "DEF")
    noops = {}
    for name in ("prefill", "prefill_packed"):
        schema = ops.OP_SCHEMAS[name][0]
        library.define(schema)
        library.impl(name, lambda *args: None, "CUDA")
        noops[name] = getattr(getattr(torch.ops, NOOP_NAMESPACE), name).default
    return library, noops


def entry_points(torch, wideattn, attention, ops, t, noop):
    """{name: (call(i), calls per call(i))} of the entry points over the tensors of one shape."""
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
    index = t["q"].get_device()

    def op_args(i):
        return (t["q"], t["k"][i % layers], t["v"][i % layers], t["cu"], t["lens"], t["table"], layouts[i % layers],
                layouts[i % layers], 1.0, None, None, None, t["out"], None, *hints, 0, 0)

    args = [op_args(i) for i in range(layers)]
    packed = [(t["q"], t["k"][i], t["v"][i], t["cu"], t["lens"], t["table"], t["out"],
               ops.pack_config(layouts[i], layouts[i], *hints, 0, 0), 1.0) for i in range(layers)]
    key_args = (index, stream, t["q"], t["k"][0], t["cu"], t["lens"], t["table"], layouts[0], layouts[0], 1.0, None,
                None, None, t["out"], None, *hints, 0, 0)
    python_packed = torch.ops.wideattn.prefill_packed.default
    cpp = {}
    if ops._prefill_packed_op is not python_packed:   # wideattn.cpp_ops loaded (--cpp-ops)
        cpp["torch.ops.wideattn_cpp.prefill_packed"] = (lambda i: ops._prefill_packed_op(*packed[i % layers]), 1)
    return {
        "wideattn.prefill": (lambda i: attention.prefill(
            t["q"], t["k"][i % layers], t["v"][i % layers], t["cu"], t["lens"], t["table"], 1.0, out=t["out"],
            max_seqlen_q=hints[0], max_seqlen_k=hints[1]), 1),
        "torch.ops.wideattn.prefill": (lambda i: ops._prefill_op(*args[i % layers]), 1),
        "torch.ops.wideattn.prefill_packed": (lambda i: python_packed(*packed[i % layers]), 1),
        "dispatcher (no-op op)": (lambda i: noop["prefill"](*args[i % layers]), 1),
        "dispatcher (no-op packed op)": (lambda i: noop["prefill_packed"](*packed[i % layers]), 1),
        "ops._prefill_cuda": (lambda i: ops._prefill_cuda(*args[i % layers]), 1),
        "plan key + lookup": (lambda i: ops.plans.get(ops.plan_key(*key_args)), 1),
        "library launch": (lambda i: context.launch_prefill(params[i % layers], stream_handle), 1),
        "plan.run": (lambda i: plan.run(*pointers[i % layers], None, stream), 1),
        **cpp,
    }, (plan, workspace)


class _Module:
    """The attributes transformers' attention modules carry (num_key_value_groups: a sliding layer's)."""

    is_causal = True
    training = False
    layer_idx = 0
    num_key_value_groups = Q_HEADS // SLIDING_KV_HEADS


def hf_entry_points(torch, t, steps):
    """{name: (call(i), calls per call(i))} of the transformers integration on one shape's sizes
    (empty where transformers cannot be imported): [B, H, T, D] queries, [B, 4, S, 512] K/V per
    layer; decode shapes also time whole decode steps (`steps` of them per repeat, each at one
    more key than the last, so that every step makes its plan as in generation: more steps than
    the plan cache holds) and steps with a 4-D mask."""
    try:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import causal_mask_function
    except ImportError as error:
        print(f"  (transformers rows skipped: {error})")
        return {}
    import wideattn.transformers as hf
    hf.register()
    batch, q_len, keys = t["seqs"], t["q_len"], t["keys"]
    layers = len(t["k"])
    module = _Module()
    query = torch.randn((batch, q_len, Q_HEADS, HEAD_DIM), device="cuda").bfloat16().transpose(1, 2)
    spare = steps if q_len == 1 else 0         # the decode steps' keys grow into them
    kv = [torch.randn((2, batch, KV_HEADS, keys + spare, HEAD_DIM), device="cuda").bfloat16() for _ in range(layers)]
    full = [(c[0][:, :, :keys], c[1][:, :, :keys]) for c in kv]
    points = {"hf layer": (lambda i: hf.attention_forward(module, query, *full[i % layers], None, scaling=1.0), 1)}
    if q_len == 1:
        def decode_step(i):
            kv_len = keys + i % (spare + 1)
            for c in kv:
                hf.attention_forward(module, query, c[0][:, :, :kv_len], c[1][:, :, :kv_len], None, scaling=1.0)

        points[f"hf decode step / layer ({layers} layers)"] = (decode_step, layers)

        def decode_step_new_kv(i):
            kv_len = keys + i % (spare + 1)
            for _ in range(layers):
                key = torch.empty((batch, KV_HEADS, kv_len, HEAD_DIM), dtype=torch.bfloat16, device="cuda")
                value = torch.empty((batch, KV_HEADS, kv_len, HEAD_DIM), dtype=torch.bfloat16, device="cuda")
                hf.attention_forward(module, query, key, value, None, scaling=1.0)

        points[f"hf decode step, new K/V / layer ({layers} layers)"] = (decode_step_new_kv, layers)

        padding = torch.ones((batch, keys), dtype=torch.bool, device="cuda")
        padding[0, :3] = False                   # batch row 0 left-padded by 3 tokens

        def decode_mask(padding_mask):
            """The mask create_causal_mask would build for a decode step at `keys` keys: sdpa_mask's
            arguments of transformers >= 5.14 (q_length, q_offset), else of the versions before
            (cache_position)."""
            common = dict(batch_size=batch, kv_length=keys, kv_offset=0, mask_function=causal_mask_function,
                          attention_mask=padding_mask, device=query.device)
            try:
                return hf.build_mask(q_length=1, q_offset=keys - 1, **common)
            except TypeError:
                return hf.build_mask(cache_position=torch.arange(keys - 1, keys, device=query.device), **common)

        def masked_step(mode, padding_mask):
            def step(i):
                previous = hf.set_mask_check(mode)
                try:
                    mask = decode_mask(padding_mask)
                    for key, value in full:
                        hf.attention_forward(module, query, key, value, mask, scaling=1.0)
                finally:
                    hf.set_mask_check(previous)
            return step

        # Alternated: auto, per_step, then the same with a padding mask (verified in build_mask
        # under auto, at the step's first layer under per_step: one synchronisation per step either way).
        for what, padding_mask in (("mask", None), ("padded mask", padding)):
            for mode in (hf.MASK_CHECK_AUTO, hf.MASK_CHECK_PER_STEP):
                points[f"hf step, 4-D {what} ({mode}) / layer"] = (masked_step(mode, padding_mask), layers)
    sliding_q = torch.randn((batch, q_len, Q_HEADS, SLIDING_HEAD_DIM), device="cuda").bfloat16().transpose(1, 2)
    sliding_keys = min(keys, SLIDING_WINDOW)
    sliding_kv = torch.randn((2, batch, SLIDING_KV_HEADS, sliding_keys, SLIDING_HEAD_DIM), device="cuda").bfloat16()
    if q_len <= sliding_keys:
        sliding = {"scaling": 1.0, "sliding_window": SLIDING_WINDOW, "dropout": 0.0}
        mask = None if q_len == 1 else torch.ones((1, 1, q_len, sliding_keys), dtype=torch.bool, device="cuda").tril(
            sliding_keys - q_len)
        points["hf sliding layer (to SDPA)"] = (
            lambda i: hf.attention_forward(module, sliding_q, sliding_kv[0], sliding_kv[1], mask, **sliding), 1)
        points["sdpa_attention_forward (direct)"] = (
            lambda i: sdpa_attention_forward(module, sliding_q, sliding_kv[0], sliding_kv[1], mask, **sliding), 1)
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names of SHAPES")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers integration's rows")
    parser.add_argument("--cpp-ops", action="store_true",
                        help="load the C++ op first (wideattn.cpp_ops.load: built the first time) and time it too")
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
    _library, noop = noop_op(torch, ops)
    report = {"calls": args.calls, "bars_us": BARS_US, "layers": LAYERS, "torch": torch.__version__, "shapes": {}}
    if args.cpp_ops:
        from wideattn import cpp_ops
        start = time.perf_counter()
        cpp_ops.load()
        report["cpp_ops_load_s"] = time.perf_counter() - start
        print(f"C++ op loaded in {report['cpp_ops_load_s']:.1f} s (wideattn.cpp_ops.load)")
    ok = True
    for shape in shapes:
        seqs, q_len, keys = SHAPES[shape]
        t = setup(torch, seqs, q_len, keys)
        calls, keep = entry_points(torch, wideattn, attention, ops, t, noop)
        count = args.calls if q_len == 1 else min(args.calls, PREFILL_CALLS)
        if not args.no_transformers:
            calls.update(hf_entry_points(torch, t, max(1, count // len(t["k"])) + ops.PLAN_CACHE_ENTRIES))
        for call, _ in calls.values():
            for i in range(len(t["k"])):
                call(i)
        torch.cuda.synchronize()
        results = {}
        print(f"{shape} ({seqs} x {keys} keys, {q_len} new token(s) per sequence; {count} calls, "
              f"{len(t['k'])} caches):")
        for name, (call, per_call) in calls.items():
            hits, misses = ops.plans.hits, ops.plans.misses
            per_call_us, busy = timed(torch, call, max(1, count // per_call), per_call)
            results[name] = {"host_us_per_call": per_call_us, "gpu_busy_at_end": busy,
                             "plan_cache_hits": ops.plans.hits - hits, "plan_cache_misses": ops.plans.misses - misses}
            bar = BARS_US.get(name)
            verdict = "" if bar is None else (f"  bar {bar} us: {'met' if per_call_us <= bar else 'MISSED'}")
            made = ops.plans.misses - misses
            print(f"  {name:44s} {per_call_us:8.2f} us/call{f'  ({made} plans made)' if made else ''}"
                  f"{'  (GPU busy after every batch: host time still measured)' if busy else ''}{verdict}")
            if bar is not None and q_len == 1 and per_call_us > bar:
                ok = False
        report["shapes"][shape] = {"sequences": seqs, "q_len": q_len, "keys": keys, "calls": count,
                                   "plan_cache": {"hits": ops.plans.hits, "misses": ops.plans.misses},
                                   "results": results}
        if args.cpp_ops:
            report["shapes"][shape]["cpp_ops"] = cpp_ops.stats()
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
