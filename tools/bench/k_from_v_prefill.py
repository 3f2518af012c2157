#!/usr/bin/env python3
"""k_from_v_prefill.py - what a prompt or a chunk over a V-only cache costs (K from V, C API 0.8.0:
wideattn.prefill_k_from_v rebuilds the keys into a bf16 K + V scratch, wideattn_k_from_v_rebuild,
then runs the K + V prefill kernel over it) against the K + V prefill over a K + V cache, on a GPU.

Shapes: a global layer of Gemma 4 31B at TP = 1 as `wideattn bench` has it (tools/cli/bench_suite.cpp:
32 query heads, 4 KV heads of 512, pages of 16), one sequence per case, the keys' pages shuffled:
  prompt_16k        16384 new tokens, no context (seq_len_k 16384)
  chunk_8k_ctx_16k  8192 new tokens after 16384 cached keys (seq_len_k 24576)
  prompt_4k         4096 new tokens, no context
K from V with Gemma 4's description (k_norm weight around 1, rotary_dims 128, rope_theta 1e6).
Variants, timed in alternated rounds (each round runs every variant --reps times, in turn):
  kv          (a) wideattn.prefill over a bf16 K + V cache (its K the keys rebuilt from V, so that
              (a) and (b) compute the same attention)
  kfv_bf16    (b) wideattn.prefill_k_from_v over the bf16 V-only cache: the rebuild into a scratch
              allocated per call, then the K + V prefill
  kfv_e4m3    (c) the same over an e4m3 V-only cache (V quantised with one scale)
  rebuild_bf16, rebuild_e4m3  wideattn.k_from_v_rebuild alone into a preallocated scratch
Each call is timed between two CUDA events on an otherwise idle stream (the host's enqueue of the
call, its checks and allocations included: `wideattn bench --timing call`'s convention), then the
stream is synchronised. Reported per variant: the median ms and TFLOP/s of causal attention,
4 x head_dim x num_q_heads x (q x context + q (q + 1) / 2) FLOPs (the rebuild: GB/s of the V read
and the K and V written); per case the time ratios b/a and c/a and the rebuild's share of (b) and
(c); and rel L2 of (b) and (c) against (a) (b should be within bf16 rounding of a; c carries e4m3's
error). Progress lines go to stdout as it runs.

Exit status 0 when every case ran, 2 when torch or a GPU is missing or an argument is bad.

usage: PYTHONPATH=build/python python3 tools/bench/k_from_v_prefill.py
       [--cases prompt_16k,chunk_8k_ctx_16k,prompt_4k] [--rounds 3] [--reps 3] [--warmup 1]
       [--seed 0] [--json OUT]

Example (the GPU machine, about 30 s on an H200): PYTHONPATH=build/python python3
tools/bench/k_from_v_prefill.py --json /tmp/k_from_v_prefill.json
"""

import argparse
import json
import statistics
import sys

Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 512, 16   # tools/cli/bench_suite.h: kGemma4QHeads, ...
ROTARY_DIMS = 128                                     # Gemma 4: partial_rotary_factor 0.25 of 512
ROPE_THETA = 1.0e6
K_NORM_SPREAD = 0.25
SOFTMAX_SCALE = 1.0                                   # Gemma 4's global layers
CASES = {                                             # name: (new tokens, cached keys), as in bench_suite.cpp
    "prompt_16k": (16384, 0),
    "chunk_8k_ctx_16k": (8192, 16384),
    "prompt_4k": (4096, 0),
}
VARIANTS = ("kv", "kfv_bf16", "kfv_e4m3", "rebuild_bf16", "rebuild_e4m3")
DEFAULT_ROUNDS, DEFAULT_REPS, DEFAULT_WARMUP = 3, 3, 1
MAX_ROUNDS, MAX_REPS = 50, 100


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\nusage:")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated case names, any of " + ", ".join(CASES) + " (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help="alternated rounds, each running every variant --reps times in turn "
                             "(1 .. %d; default %%(default)s)" % MAX_ROUNDS)
    parser.add_argument("--reps", type=int, default=DEFAULT_REPS,
                        help="timed calls of a variant per round (1 .. %d; default %%(default)s)" % MAX_REPS)
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                        help="untimed calls of every variant before the first round (>= 0; default %(default)s): "
                             "kernel modules load, plans and the caching allocator's blocks are made")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the inputs (default %(default)s)")
    parser.add_argument("--json", metavar="OUT", help="also write the raw results (every sample) to this file")
    args = parser.parse_args(argv)
    args.case_list = [name for name in args.cases.split(",") if name]
    unknown = [name for name in args.case_list if name not in CASES]
    if not args.case_list or unknown or "" in args.cases.split(","):
        parser.error(f"--cases: {args.cases!r} must list case names of {', '.join(CASES)}")
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds: {args.rounds} is outside 1 .. {MAX_ROUNDS}")
    if not 1 <= args.reps <= MAX_REPS:
        parser.error(f"--reps: {args.reps} is outside 1 .. {MAX_REPS}")
    if args.warmup < 0:
        parser.error(f"--warmup: {args.warmup} must be >= 0")
    return args


def causal_flops(q_len, context):
    """4 x D x Hq x (q x context + q (q + 1) / 2): the two matrix products of causal attention."""
    return 4 * HEAD_DIM * Q_HEADS * (q_len * context + q_len * (q_len + 1) // 2)


def rebuild_bytes(keys, v_bytes):
    """Bytes a rebuild moves: the V read (v_bytes per element) and the bf16 K and V written."""
    return keys * KV_HEADS * HEAD_DIM * (v_bytes + 2 + 2)


class Setup:
    """The tensors of one case on the GPU: q, out, the K + V cache (K rebuilt from V), the bf16 and
    e4m3 V-only caches, the K-from-V description, the metadata and a preallocated rebuild scratch."""

    def __init__(self, torch, wideattn, q_len, context, seed):
        device = "cuda"
        generator = torch.Generator(device=device).manual_seed(seed)
        self.q_len, self.keys = q_len, q_len + context
        pages = -(-self.keys // BLOCK)
        shape = (pages, BLOCK, KV_HEADS, HEAD_DIM)
        self.q = torch.randn((q_len, Q_HEADS, HEAD_DIM), device=device, generator=generator).bfloat16()
        self.out = torch.empty_like(self.q)
        self.v = torch.randn(shape, device=device, generator=generator).bfloat16()
        self.block_table = torch.randperm(pages, device=device, generator=generator).int().view(1, pages)
        self.cu = torch.tensor([0, q_len], dtype=torch.int32, device=device)
        self.lens = torch.tensor([self.keys], dtype=torch.int32, device=device)
        self.weights = (1.0 + K_NORM_SPREAD * torch.randn(HEAD_DIM, device=device, generator=generator)).bfloat16().float()
        self.v_scale = wideattn.compute_scale(self.v.view(-1, KV_HEADS, HEAD_DIM))
        self.v_e4m3 = torch.empty(shape, dtype=getattr(torch, "float8_e4m3fn", torch.uint8), device=device)
        wideattn.quantize_to_cache(self.v.view(-1, KV_HEADS, HEAD_DIM), self.v_e4m3,
                                   torch.arange(pages * BLOCK, device=device), self.v_scale)
        # (a)'s K cache: the keys rebuilt from V at the same pages, so (a) and (b) agree.
        self.k = torch.empty(shape, dtype=torch.bfloat16, device=device)
        v_copy = torch.empty_like(self.v)
        wideattn.k_from_v_rebuild(self.q, self.v, self.cu, self.lens, self.block_table, self.weights, ROTARY_DIMS,
                                  self.k, v_copy, self.block_table, rope_theta=ROPE_THETA, out=self.out,
                                  max_seqlen_k=self.keys)
        self.scratch_k = torch.empty(shape, dtype=torch.bfloat16, device=device)
        self.scratch_v = torch.empty(shape, dtype=torch.bfloat16, device=device)
        self.identity = torch.arange(pages, dtype=torch.int32, device=device).view(1, pages)
        torch.cuda.synchronize()
        if not torch.equal(v_copy, self.v):
            raise RuntimeError("k_from_v_rebuild's V of a bf16 cache is not a copy of it")
        self.hints = dict(max_seqlen_q=q_len, max_seqlen_k=self.keys)

    def calls(self, wideattn):
        """{variant: a function making its call} (module docstring)."""
        def kv():
            wideattn.prefill(self.q, self.k, self.v, self.cu, self.lens, self.block_table, SOFTMAX_SCALE,
                             out=self.out, **self.hints)

        def kfv(cache, scale):
            return lambda: wideattn.prefill_k_from_v(self.q, cache, self.cu, self.lens, self.block_table,
                                                     SOFTMAX_SCALE, self.weights, ROTARY_DIMS, rope_theta=ROPE_THETA,
                                                     out=self.out, v_scale=scale, **self.hints)

        def rebuild(cache, scale):
            return lambda: wideattn.k_from_v_rebuild(self.q, cache, self.cu, self.lens, self.block_table,
                                                     self.weights, ROTARY_DIMS, self.scratch_k, self.scratch_v,
                                                     self.identity, rope_theta=ROPE_THETA, v_scale=scale,
                                                     out=self.out, **self.hints)

        return {"kv": kv, "kfv_bf16": kfv(self.v, None), "kfv_e4m3": kfv(self.v_e4m3, self.v_scale),
                "rebuild_bf16": rebuild(self.v, None), "rebuild_e4m3": rebuild(self.v_e4m3, self.v_scale)}


def time_call(torch, call):
    """Milliseconds between two CUDA events around one call on an idle stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def outputs_agree(torch, calls, setup):
    """rel L2 of (b) and (c) against (a) on the case's tensors."""
    results = {}
    for name in ("kv", "kfv_bf16", "kfv_e4m3"):
        calls[name]()
        torch.cuda.synchronize()
        results[name] = setup.out.double().clone()
    base = results["kv"]
    return {name: ((results[name] - base).norm() / base.norm()).item() for name in ("kfv_bf16", "kfv_e4m3")}


def run_case(torch, wideattn, name, args):
    q_len, context = CASES[name]
    print(f"{name}: {q_len} new tokens after {context} cached keys; setting up", flush=True)
    setup = Setup(torch, wideattn, q_len, context, args.seed)
    calls = setup.calls(wideattn)
    for _ in range(args.warmup):
        for variant in VARIANTS:
            calls[variant]()
    torch.cuda.synchronize()
    agreement = outputs_agree(torch, calls, setup)
    samples = {variant: [] for variant in VARIANTS}
    for round_index in range(args.rounds):
        for variant in VARIANTS:
            times = [time_call(torch, calls[variant]) for _ in range(args.reps)]
            samples[variant] += times
            print(f"  round {round_index + 1}/{args.rounds} {variant:13s} " +
                  " ".join(f"{t:.3f}" for t in times) + " ms", flush=True)
    flops = causal_flops(q_len, context)
    result = {"name": name, "q_len": q_len, "context": context, "seq_len_k": setup.keys, "flops": flops,
              "rel_l2_vs_kv": agreement, "variants": {}}
    for variant in VARIANTS:
        median = statistics.median(samples[variant])
        entry = {"samples_ms": samples[variant], "median_ms": median}
        if variant.startswith("rebuild"):
            moved = rebuild_bytes(setup.keys, 1 if variant.endswith("e4m3") else 2)
            entry.update(bytes=moved, gbps=moved / (median * 1e-3) / 1e9)
        else:
            entry["tflops"] = flops / (median * 1e-3) / 1e12
        result["variants"][variant] = entry
    medians = {variant: result["variants"][variant]["median_ms"] for variant in VARIANTS}
    result["ratios"] = {"b_over_a": medians["kfv_bf16"] / medians["kv"], "c_over_a": medians["kfv_e4m3"] / medians["kv"],
                        "rebuild_share_b": medians["rebuild_bf16"] / medians["kfv_bf16"],
                        "rebuild_share_c": medians["rebuild_e4m3"] / medians["kfv_e4m3"]}
    del setup, calls
    torch.cuda.empty_cache()
    return result


def summary_lines(results):
    lines = [f"{'case':18s} {'variant':13s} {'median ms':>10s} {'TFLOP/s':>8s} {'GB/s':>7s}"]
    for result in results:
        for variant in VARIANTS:
            entry = result["variants"][variant]
            tflops = f"{entry['tflops']:8.1f}" if "tflops" in entry else f"{'':8s}"
            gbps = f"{entry['gbps']:7.0f}" if "gbps" in entry else f"{'':7s}"
            lines.append(f"{result['name']:18s} {variant:13s} {entry['median_ms']:10.3f} {tflops} {gbps}")
        r = result["ratios"]
        lines.append(f"{result['name']:18s} b/a {r['b_over_a']:.3f}, c/a {r['c_over_a']:.3f}; the rebuild's share "
                     f"of b {r['rebuild_share_b']:.3f}, of c {r['rebuild_share_c']:.3f}; rel L2 against a: b "
                     f"{result['rel_l2_vs_kv']['kfv_bf16']:.2e}, c {result['rel_l2_vs_kv']['kfv_e4m3']:.2e}")
    return lines


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
        import wideattn
    except ImportError as error:
        print(f"k_from_v_prefill.py: needs torch and the wideattn package (PYTHONPATH=build/python): {error}",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("k_from_v_prefill.py: torch sees no CUDA device (run it on the GPU machine)", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name()
    print(f"k_from_v_prefill.py on {device}, libwideattn {wideattn.version()}: {args.rounds} rounds x {args.reps} "
          f"reps, {args.warmup} warm-up", flush=True)
    results = [run_case(torch, wideattn, name, args) for name in args.case_list]
    for line in summary_lines(results):
        print(line)
    if args.json:
        report = {"tool": "k_from_v_prefill.py", "device": device, "library_version": wideattn.version(),
                  "shape": {"num_q_heads": Q_HEADS, "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
                            "block_size": BLOCK, "rotary_dims": ROTARY_DIMS, "rope_theta": ROPE_THETA,
                            "softmax_scale": SOFTMAX_SCALE},
                  "timing": "call", "rounds": args.rounds, "reps": args.reps, "warmup": args.warmup,
                  "seed": args.seed, "cases": results}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
