#!/usr/bin/env python3
"""Peer harness: wideattn against PyTorch SDPA and Triton paged prefill and split-KV decode kernels.

Runs on one GPU in one process (docs/design.md section 7): builds the Gemma 4 global-layer suite
(Hq 32, Hkv 4, D 512, bf16, page 16, shuffled block table), cross-checks every implementation
against an fp64 reference (the bundle's fp64 reference kernel through libwideattn, or a torch
float64 computation on sampled query rows when the library is unavailable), then times all of
them interleaved with CUDA events and reports ms, TFLOP/s, the percentage of the tensor rate
measured in the same run, and wideattn's speedup over each peer. Writes a JSON report.

--mode decode runs the decode suite instead (single tokens and 5-token verifications after long
contexts, a mixed batch of one chunk and 63 decodes and its parts alone): wideattn with its
split-KV workspace and hints, and the Triton split-KV decode peer (peers/triton_paged_decode.py),
each with bf16 K/V and with e4m3 K/V + bf16 Q on the same (e4m3-representable) values, and the
16-row Triton peer (triton-rows16: the prefill peer with 16-row blocks of packed heads, bf16 K/V,
its configuration searched per case), reported
in ms, GB/s of K/V read and the percentage of the device-to-device copy bandwidth measured at the
start and end of the same run, with wideattn's speedup per K/V dtype.

The case construction, byte and FLOP counting, statistics and table formatting are plain Python
and import without torch; torch and triton load only when the GPU part runs.
"""

import argparse
import dataclasses
import datetime
import json
import math
import os
import statistics
import sys
import time
import warnings

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))  # tools/bench/, beside peers/
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)

from peers import wideattn_ctypes  # noqa: E402  (standard library only)
from e2e_drift import v_slot_position  # noqa: E402  (the transposed V layout's slot order; no torch)

# Gemma 4 31B global layers (docs/design.md sections 1 and 7).
NUM_Q_HEADS = 32
NUM_KV_HEADS = 4
TP4_Q_HEADS = NUM_Q_HEADS // 4
TP4_KV_HEADS = NUM_KV_HEADS // 4
HEAD_DIM = 512
PAGE_SIZE = 16
SOFTMAX_SCALE = 1.0
K1 = 1024
QUICK_SCALE = 8                      # --quick divides every token count by this

# Accuracy.
MISMATCH_REL_L2 = 2e-2               # refuse to time an implementation above this
REF_ROWS_PER_SEQ = 64                # query rows per sequence of the torch fp64 fallback
DEFAULT_Q_STD = HEAD_DIM ** -0.5     # q * k scores of unit variance at scale 1.0

# Timing.
DEFAULT_REPS = 20
DEFAULT_WARMUP = 3
MIN_BUDGET_REPS = 5                  # floor when --impl-budget-s trims an implementation
TUNE_SCREEN_REPS = 1                 # timed runs per tuning candidate (after one warm-up)
TUNE_FINAL_REPS = 3                  # timed runs of each finalist
TUNE_FINALISTS = 3
ROTATE_FACTOR = 3                    # input copies so one rotation touches >= 3x the L2
MAX_COPIES = 8
GEMM_SIZE = 8192                     # cuBLAS bf16 GEMM for the measured tensor rate
GEMM_REPS = 20

IMPL_WIDEATTN = "wideattn"
IMPL_WIDEATTN_MMA = "wideattn-mma"
MMA_TIER_KERNEL = "mma_bf16_d512"
IMPL_TRITON_ENGINE = "triton-engine"
IMPL_TRITON_TUNED = "triton-tuned"
IMPL_SDPA = "sdpa"
IMPL_SDPA_EXPANDED = "sdpa-expanded"
ALL_IMPLS = (IMPL_WIDEATTN, IMPL_WIDEATTN_MMA, IMPL_TRITON_ENGINE, IMPL_TRITON_TUNED, IMPL_SDPA,
             IMPL_SDPA_EXPANDED)
IMPL_NOTES = {
    IMPL_WIDEATTN: "libwideattn, dispatcher's bf16 kernel, paged cache",
    IMPL_WIDEATTN_MMA: "libwideattn, the mma tier (mma_bf16_d512) by name, when the dispatcher "
                       "picks another kernel (the Hopper tier on sm_90)",
    IMPL_TRITON_ENGINE: "Triton paged prefill as an engine ships it (M16 N32 w4 s3)",
    IMPL_TRITON_TUNED: "Triton paged prefill, best config per case (incl. head packing)",
    IMPL_SDPA: "torch SDPA, enable_gqa=True, contiguous per-sequence K/V prepared untimed",
    IMPL_SDPA_EXPANDED: "torch SDPA, K/V repeat_interleave'd to Hq heads, prepared untimed",
}

# Decode mode (--mode decode): wideattn and the Triton split-KV decode peer, each with bf16 K/V
# and with e4m3 K/V + bf16 Q.
MODE_PREFILL = "prefill"
MODE_DECODE = "decode"
IMPL_WIDEATTN_E4M3 = "wideattn-e4m3"
IMPL_WIDEATTN_E4M3_VT = "wideattn-e4m3-vt"
IMPL_TRITON_DECODE = "triton-decode"
IMPL_TRITON_DECODE_E4M3 = "triton-decode-e4m3"
IMPL_TRITON_ROWS16 = "triton-rows16"
DECODE_IMPLS = (IMPL_WIDEATTN, IMPL_WIDEATTN_E4M3, IMPL_WIDEATTN_E4M3_VT, IMPL_TRITON_DECODE,
                IMPL_TRITON_DECODE_E4M3, IMPL_TRITON_ROWS16)
DECODE_BASELINE = {IMPL_TRITON_DECODE: IMPL_WIDEATTN, IMPL_TRITON_DECODE_E4M3: IMPL_WIDEATTN_E4M3,
                   IMPL_TRITON_ROWS16: IMPL_WIDEATTN}
E4M3_IMPLS = (IMPL_WIDEATTN_E4M3, IMPL_WIDEATTN_E4M3_VT, IMPL_TRITON_DECODE_E4M3)
WIDEATTN_DECODE_IMPLS = (IMPL_WIDEATTN, IMPL_WIDEATTN_E4M3, IMPL_WIDEATTN_E4M3_VT)
DECODE_IMPL_NOTES = {
    IMPL_WIDEATTN: "libwideattn, dispatcher's kernel, bf16 K/V, split-KV workspace + hints",
    IMPL_WIDEATTN_E4M3: "libwideattn, dispatcher's kernel, e4m3 K/V + bf16 Q, split-KV workspace + hints",
    IMPL_WIDEATTN_E4M3_VT: "the same over the transposed V layout (WIDEATTN_FLAG_V_TRANSPOSED: the same e4m3 "
                           "V codes moved into [block][kv_head][d][slot] pages), the dispatcher's kernel for it",
    IMPL_TRITON_DECODE: "Triton paged split-KV decode (stage 1 per sequence x KV head x split, stage 2 "
                        "merge) as engines ship it; sequences over 8 tokens by the Triton prefill "
                        "(engine config)",
    IMPL_TRITON_DECODE_E4M3: "the same decode kernel on e4m3 K/V, dequantised in the kernel (decode-only "
                             "batches)",
    IMPL_TRITON_ROWS16: "the 16-row Triton peer: the Triton paged prefill kernel with 16-row query blocks "
                        "packing a KV head's query heads (two tokens x 8 heads a program: each K/V tile read "
                        "once per KV head, no split-KV), bf16 K/V, at its best configuration of "
                        "ROWS16_BLOCK_N x ROWS16_WARPS x ROWS16_STAGES searched on each case",
}
# The 16-row peer's search space (its block_m is 16 with packed heads).
ROWS16_BLOCK_M = 16
ROWS16_BLOCK_N = (32, 64)
ROWS16_WARPS = (4, 8)
ROWS16_STAGES = (2, 3)
VERIFY_TOKENS = 5                    # speculative verification: 5 query tokens per sequence
MIXED_CASE = "mixed-chunk2k-decode63"
MIXED_CHUNK_CASE = "chunk-2k@4k"
MIXED_DECODES_CASE = "decode-63@8k"
MIXED_CHUNK_TOKENS = 2 * K1          # the mixed batch: one 2048-token chunk at context 4096
MIXED_CHUNK_CONTEXT = 4 * K1
MIXED_DECODES = 63                   # and 63 single-token decodes at context 8192
MIXED_DECODE_CONTEXT = 8 * K1
E4M3_SCALE = 2.0 ** -5               # per-tensor K/V scale: N(0, 1) values stay far below 448 * scale
MISMATCH_REL_L2_E4M3 = 0.15          # the 8-bit kernels' bound on dequantised inputs (docs/design.md)
COPY_BYTES = 1 << 30                 # the copy-bandwidth probe: one 1 GiB device-to-device copy
COPY_REPS = 7
COPY_WARMUP = 2

STATUS_OK = "ok"
STATUS_OOM = "oom"
STATUS_MISMATCH = "mismatch"
STATUS_UNAVAILABLE = "unavailable"
STATUS_FAILED = "failed"


# ----------------------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class Case:
    """One attention call: per-sequence new tokens and cached context."""

    name: str
    q_lens: tuple
    contexts: tuple
    num_q_heads: int = NUM_Q_HEADS
    num_kv_heads: int = NUM_KV_HEADS
    head_dim: int = HEAD_DIM

    @property
    def seq_lens_k(self):
        return tuple(q + c for q, c in zip(self.q_lens, self.contexts))

    @property
    def total_q(self):
        return sum(self.q_lens)

    @property
    def flops(self):
        return causal_flops(self.head_dim, self.num_q_heads, self.q_lens, self.contexts)

    def shape(self):
        seqs = " ".join(f"{q}@{c}" for q, c in zip(self.q_lens, self.contexts))
        return f"Hq{self.num_q_heads}/Hkv{self.num_kv_heads} q@ctx {seqs}"


def causal_flops(head_dim, num_q_heads, q_lens, contexts):
    """docs/design.md section 7: 4 * D * Hq * (q * context + q * (q + 1) / 2), summed."""
    return sum(4 * head_dim * num_q_heads * (q * c + q * (q + 1) // 2)
               for q, c in zip(q_lens, contexts))


def build_suite(quick=False):
    """The Gemma 4 31B global-layer suite; --quick divides every length by QUICK_SCALE."""
    scale = QUICK_SCALE if quick else 1

    def n(tokens):
        return max(1, tokens // scale)

    def single(name, q, ctx, **heads):
        return Case(name, (n(q),), (n(ctx) if ctx else 0,), **heads)

    return [
        single("prompt-4k", 4 * K1, 0),
        single("prompt-16k", 16 * K1, 0),
        single("prompt-20k", 20 * K1, 0),
        single("chunk-4k@8k", 4 * K1, 8 * K1),
        single("chunk-8k@8k", 8 * K1, 8 * K1),
        single("chunk-4k@16k", 4 * K1, 16 * K1),
        single("chunk-8k@16k", 8 * K1, 16 * K1),
        Case("mixed-4seq", tuple(n(q) for q in (3000, 1500, 700, 64)),
             tuple(n(c) if c else 0 for c in (0, 4096, 9000, 16000))),
        single("tp4-prompt-16k", 16 * K1, 0, num_q_heads=TP4_Q_HEADS, num_kv_heads=TP4_KV_HEADS),
    ]


def select_cases(suite, names):
    """The cases named in `names` (comma-separated), in suite order; all if empty."""
    if not names:
        return list(suite)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    known = {case.name for case in suite}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(f"unknown case(s) {unknown}; known: {sorted(known)}")
    return [case for case in suite if case.name in wanted]


def input_copies(working_set_bytes, l2_bytes):
    """Rotated input copies so that one rotation touches at least ROTATE_FACTOR x the L2."""
    if working_set_bytes <= 0:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(ROTATE_FACTOR * l2_bytes / working_set_bytes)))


def blocks_needed(seq_len_k, page_size=PAGE_SIZE):
    return -(-seq_len_k // page_size)


# ----------------------------------------------------------------------------- statistics


def percentile(values, fraction):
    """Linear-interpolated percentile (fraction in 0..1) of a non-empty list."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize_times(times_ms):
    return {"ms_median": statistics.median(times_ms), "ms_min": min(times_ms),
            "ms_p90": percentile(times_ms, 0.9), "reps": len(times_ms),
            "ms_all": [round(ms, 4) for ms in times_ms]}


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def balanced_order(items, rep):
    """The order of repetition rep, from a balanced Latin square (Williams design) over items:
    the timing order of reports made before c0190c2 (2026-11-29; time_interleaved now uses
    balanced_sequence); tools/bench/peer_predecessors.py rebuilds those reports' predecessors with it.

    Round-robin timing in one fixed order makes every implementation always follow the same
    predecessor; after a long, power-hungry one (SDPA's math backend draws ~700 W for half a
    second at 16k) the GPU's power controller still holds the clock down for the next kernel,
    so the implementation listed first paid for the one listed last. (A rotation does not help:
    it keeps every neighbour.) Over len(items) repetitions (2 x len(items) when that is odd)
    each item takes every position once and follows every other item equally often.
    """
    n = len(items)
    if n == 0:
        return []
    # First row 0, 1, n-1, 2, n-2, ...; row r adds r (mod n); odd n also needs the rows reversed.
    first = [0]
    low, high = 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = n if n % 2 == 0 else 2 * n
    r = rep % rows
    row = [items[(index + r) % n] for index in first]
    return row if r < n else row[::-1]


def balanced_sequence(items):
    """One period of a cyclic run order over items in which every item follows every other item
    exactly once, the wrap-around from the last run to the first included: an Eulerian circuit
    of the complete directed graph (Hierholzer's algorithm, deterministic), len(items) - 1 runs of
    each item. Repeating it keeps every predecessor equally frequent across the whole run;
    balanced_order's repetitions balance predecessors only inside each repetition, and the
    step from one repetition to the next always paired the same items (each item followed the
    one two places after it in the list: the nine-case run at a12e38f had triton-tuned after
    SDPA-expanded in 6 of 20 repetitions and wideattn after triton-engine in 7).
    """
    n = len(items)
    if n <= 1:
        return list(items)
    unused = {a: [b for b in range(n) if b != a] for a in range(n)}
    stack, circuit = [0], []
    while stack:
        node = stack[-1]
        if unused[node]:
            stack.append(unused[node].pop(0))
        else:
            circuit.append(stack.pop())
    circuit.reverse()  # starts and ends at item 0; the cyclic order drops the repeated end
    return [items[index] for index in circuit[:-1]]


def budget_reps(reps, ms_per_run, budget_s):
    """Repetitions an implementation gets under a per-implementation time budget."""
    if not budget_s or ms_per_run <= 0:
        return reps
    return max(MIN_BUDGET_REPS, min(reps, int(budget_s * 1e3 / ms_per_run)))


# ----------------------------------------------------------------------------- output


TABLE_COLUMNS = (("case", "<", 14), ("impl", "<", 13), ("ms", ">", 8), ("min", ">", 8),
                 ("p90", ">", 8), ("TFLOP/s", ">", 7), ("%gemm", ">", 5), ("%mma", ">", 5),
                 ("wa x", ">", 5), ("relL2", ">", 7), ("meanabs", ">", 7), ("maxabs", ">", 7),
                 ("note", "<", 0))


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def table_rows(report):
    """One row (list of strings) per (case, implementation) of a report dict."""
    rows = []
    full_reps = report["environment"].get("reps", DEFAULT_REPS)
    for case in report["cases"]:
        wideattn_ms = case["impls"].get(IMPL_WIDEATTN, {}).get("ms_median")
        for name, impl in case["impls"].items():
            ms = impl.get("ms_median")
            speedup = None
            if name != IMPL_WIDEATTN and ms and wideattn_ms:
                speedup = ms / wideattn_ms
            err = impl.get("error") or {}
            note = impl["status"] if impl["status"] != STATUS_OK else ""
            if impl.get("config"):
                note = (note + " " + impl["config"]).strip()
            if impl.get("reps") and impl["reps"] < full_reps:
                note = (note + f" reps={impl['reps']}").strip()
            rows.append([case["name"], name, _fmt(ms, ".3f"), _fmt(impl.get("ms_min"), ".3f"),
                         _fmt(impl.get("ms_p90"), ".3f"), _fmt(impl.get("tflops"), ".1f"),
                         _fmt(impl.get("pct_gemm"), ".1f"), _fmt(impl.get("pct_mma"), ".1f"),
                         _fmt(speedup, ".2f"), _fmt(err.get("rel_l2"), ".1e"),
                         _fmt(err.get("mean_abs"), ".1e"), _fmt(err.get("max_abs"), ".1e"), note])
    return rows


def format_table(report):
    """The compact stdout table of a report dict."""
    header = [name for name, _, _ in TABLE_COLUMNS]
    lines = []
    for row in [header] + table_rows(report):
        cells = [format(cell, f"{align}{width}") if width else cell
                 for cell, (_, align, width) in zip(row, TABLE_COLUMNS)]
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)


def format_header(report):
    env = report["environment"]
    rates = report["rates"]
    mma = rates.get("mma_tflops")
    lines = [
        f"{env['date']}  {env['gpu']}  torch {env['torch']}  triton {env['triton']}  "
        f"commit {env.get('commit') or '-'}  {'QUICK (/' + str(QUICK_SCALE) + ')' if env['quick'] else 'full'}",
        f"tensor rate: cuBLAS bf16 {GEMM_SIZE}^3 {rates['gemm_tflops']:.1f} TFLOP/s (%gemm); "
        f"mma.sync bf16 {('%.1f TFLOP/s (--mma-rate)' % mma) if mma else 'not given'} (%mma)",
        f"wideattn: {report['wideattn']['status']} {report['wideattn'].get('detail', '')}".rstrip(),
        f"sdpa backends accepting D={HEAD_DIM}: gqa {report['sdpa_backends']['gqa']}, "
        f"expanded {report['sdpa_backends']['expanded']}",
        "wa x = peer ms / wideattn ms; errors vs fp64 reference; SDPA K/V gathered untimed",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- decode mode: cases


def build_decode_suite(quick=False):
    """The decode suite (docs/design.md section 7, `wideattn bench --suite decode`): single tokens
    and 5-token verifications after long contexts, the mixed batch of one 2048-token chunk at
    context 4096 and 63 decodes at context 8192, and its two parts alone. --quick divides every
    context and the chunk by QUICK_SCALE (the decodes keep their one or five tokens)."""
    scale = QUICK_SCALE if quick else 1

    def n(tokens):
        return max(1, tokens // scale)

    def batch(name, count, q_len, context):
        return Case(name, (q_len,) * count, (n(context),) * count)

    chunk, chunk_ctx = n(MIXED_CHUNK_TOKENS), n(MIXED_CHUNK_CONTEXT)
    decode_ctx = n(MIXED_DECODE_CONTEXT)
    return [
        batch("decode-1@32k", 1, 1, 32 * K1),
        batch("decode-1@128k", 1, 1, 128 * K1),
        batch("decode-8@32k", 8, 1, 32 * K1),
        batch("decode-64@8k", 64, 1, 8 * K1),
        batch("decode-128@4k", 128, 1, 4 * K1),
        batch("verify5-1@20k", 1, VERIFY_TOKENS, 20 * K1),
        batch("verify5-32@20k", 32, VERIFY_TOKENS, 20 * K1),
        Case(MIXED_CASE, (chunk,) + (1,) * MIXED_DECODES, (chunk_ctx,) + (decode_ctx,) * MIXED_DECODES),
        Case(MIXED_CHUNK_CASE, (chunk,), (chunk_ctx,)),
        Case(MIXED_DECODES_CASE, (1,) * MIXED_DECODES, (decode_ctx,) * MIXED_DECODES),
    ]


def suite_for(mode, quick=False):
    return build_decode_suite(quick) if mode == MODE_DECODE else build_suite(quick)


def kv_read_bytes(case, element_bytes):
    """Bytes of K and V a call must read: every visible key of every sequence (seq_lens_k of
    them), once per KV head, K and V, element_bytes each (2 for bf16, 1 for e4m3)."""
    return 2 * sum(case.seq_lens_k) * case.num_kv_heads * case.head_dim * element_bytes


def gbps(num_bytes, ms):
    return num_bytes / (ms * 1e-3) / 1e9


def copy_gbps(copy_bytes, ms):
    """Device-to-device copy bandwidth: copy_bytes read and copy_bytes written in ms."""
    return gbps(2 * copy_bytes, ms)


def pct(value, ceiling):
    return 100 * value / ceiling if value is not None and ceiling else None


def decode_peer_of(name):
    """The wideattn implementation a decode peer is compared with (same K/V dtype), or None."""
    return DECODE_BASELINE.get(name)


# ----------------------------------------------------------------------------- decode mode: output


DECODE_COLUMNS = (("case", "<", 22), ("impl", "<", 18), ("ms", ">", 8), ("min", ">", 8),
                  ("p90", ">", 8), ("GB/s", ">", 7), ("%cp0", ">", 5), ("%cp1", ">", 5),
                  ("wa x", ">", 5), ("relL2", ">", 7), ("maxabs", ">", 7), ("srcmabs", ">", 7),
                  ("err x", ">", 5), ("note", "<", 0))


def fill_copy_percentages(report):
    """Each timed decode entry's GB/s as a percentage of the copy bandwidth at the start
    (pct_copy_before) and at the end (pct_copy_after) of the run."""
    rates = report["rates"]
    for case in report["cases"]:
        for impl in case["impls"].values():
            if impl.get("gbps") is not None:
                impl["pct_copy_before"] = pct(impl["gbps"], rates.get("copy_gbps_before"))
                impl["pct_copy_after"] = pct(impl["gbps"], rates.get("copy_gbps_after"))


def fill_speedups(case_result):
    """wideattn_speedup of each timed peer: its median ms over that of the wideattn
    implementation with the same K/V dtype."""
    impls = case_result["impls"]
    for name, impl in impls.items():
        baseline = impls.get(decode_peer_of(name) or "", {})
        if impl.get("ms_median") and baseline.get("ms_median"):
            impl["wideattn_speedup"] = impl["ms_median"] / baseline["ms_median"]


def fill_error_ratios(case_result):
    """error_vs_peer of each wideattn e4m3 implementation: its mean abs, max abs and rel L2 error
    over those of the Triton e4m3 peer on the same inputs, against the fp64 reference of the
    dequantised K/V (dequantised) and of the values the cache was quantised from (source)."""
    impls = case_result["impls"]
    peer = impls.get(IMPL_TRITON_DECODE_E4M3, {}).get("error")
    if not peer:
        return
    for name in (IMPL_WIDEATTN_E4M3, IMPL_WIDEATTN_E4M3_VT):
        err = impls.get(name, {}).get("error")
        if not err:
            continue
        ratios = {}
        pairs = (("dequantised", err, peer), ("source", err.get("vs_source"), peer.get("vs_source")))
        for label, ours, theirs in pairs:
            if ours and theirs:
                ratios[label] = {key: ours[key] / theirs[key] if theirs[key] > 0 else float("inf")
                                 for key in ("mean_abs", "max_abs", "rel_l2")}
        impls[name]["error_vs_peer"] = ratios


def mixed_ratios(report):
    """mixed / (chunk + decodes) per implementation that ran all three cases of the mixed batch."""
    cases = {case["name"]: case["impls"] for case in report["cases"]}
    parts = [cases.get(name) for name in (MIXED_CASE, MIXED_CHUNK_CASE, MIXED_DECODES_CASE)]
    if any(part is None for part in parts):
        return {}
    ratios = {}
    for name, entry in parts[0].items():
        times = [part.get(name, {}).get("ms_median") for part in parts]
        if all(times):
            ratios[name] = {"mixed_ms": times[0], "chunk_ms": times[1], "decodes_ms": times[2],
                            "ratio": times[0] / (times[1] + times[2])}
    return ratios


def decode_table_rows(report):
    rows = []
    for case in report["cases"]:
        for name, impl in case["impls"].items():
            err = impl.get("error") or {}
            note = impl["status"] if impl["status"] != STATUS_OK else ""
            if impl.get("config"):
                note = (note + " " + impl["config"]).strip()
            rows.append([case["name"], name, _fmt(impl.get("ms_median"), ".3f"), _fmt(impl.get("ms_min"), ".3f"),
                         _fmt(impl.get("ms_p90"), ".3f"), _fmt(impl.get("gbps"), ".0f"),
                         _fmt(impl.get("pct_copy_before"), ".1f"), _fmt(impl.get("pct_copy_after"), ".1f"),
                         _fmt(impl.get("wideattn_speedup"), ".2f"), _fmt(err.get("rel_l2"), ".1e"),
                         _fmt(err.get("max_abs"), ".1e"), _fmt((err.get("vs_source") or {}).get("mean_abs"), ".1e"),
                         _fmt(impl.get("error_vs_peer", {}).get("source", {}).get("mean_abs"), ".2f"), note])
    return rows


def format_rows(header_columns, rows):
    lines = []
    for row in [[name for name, _, _ in header_columns]] + rows:
        cells = [format(cell, f"{align}{width}") if width else cell
                 for cell, (_, align, width) in zip(row, header_columns)]
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)


def format_decode_table(report):
    """The decode mode's stdout table, then the mixed-batch ratios."""
    lines = [format_rows(DECODE_COLUMNS, decode_table_rows(report))]
    for name, ratio in report.get("mixed_ratios", {}).items():
        lines.append(f"{MIXED_CASE} / ({MIXED_CHUNK_CASE} + {MIXED_DECODES_CASE}), {name}: "
                     f"{ratio['mixed_ms']:.3f} / ({ratio['chunk_ms']:.3f} + {ratio['decodes_ms']:.3f}) = "
                     f"{ratio['ratio']:.3f}")
    return "\n".join(lines)


def format_decode_header(report):
    env = report["environment"]
    rates = report["rates"]
    after = rates.get("copy_gbps_after")
    return "\n".join([
        f"{env['date']}  {env['gpu']}  torch {env['torch']}  triton {env['triton']}  "
        f"commit {env.get('commit') or '-'}  decode {'QUICK (/' + str(QUICK_SCALE) + ')' if env['quick'] else 'full'}",
        f"copy bandwidth (1 GiB device-to-device, read + write): {rates['copy_gbps_before']:.0f} GB/s at the start "
        f"(%cp0), {('%.0f GB/s' % after) if after else 'not yet measured'} at the end (%cp1)",
        f"wideattn: {report['wideattn']['status']} {report['wideattn'].get('detail', '')}".rstrip(),
        "GB/s = K/V bytes of every visible key once per KV head / ms; wa x = peer ms / wideattn ms "
        "(same K/V dtype); relL2, maxabs vs the fp64 reference on the dequantised inputs; srcmabs: mean abs "
        "error vs the fp64 reference on the values the e4m3 cache was quantised from; err x: that over the "
        "Triton e4m3 peer's",
    ])


# ----------------------------------------------------------------------------- GPU part


def _lazy_torch():
    import torch
    return torch


class CaseData:
    """Device tensors of one case: rotated input copies, paged caches, per-sequence views."""

    def __init__(self, case, copies, q_std, generators):
        torch = _lazy_torch()
        self.case = case
        self.copies = copies
        dev = "cuda"
        bf16 = torch.bfloat16
        hq, hkv, d = case.num_q_heads, case.num_kv_heads, case.head_dim
        self.group = hq // hkv
        blocks_per_seq = [blocks_needed(length) for length in case.seq_lens_k]
        self.num_blocks = sum(blocks_per_seq)
        max_blocks = max(blocks_per_seq)

        cpu_generator, cuda_generator = generators
        permutation = torch.randperm(self.num_blocks, generator=cpu_generator)
        table = torch.zeros(len(case.q_lens), max_blocks, dtype=torch.int32)
        start = 0
        for seq, count in enumerate(blocks_per_seq):
            table[seq, :count] = permutation[start:start + count]
            start += count
        self.block_table = table.to(dev)
        cu = [0]
        for q_len in case.q_lens:
            cu.append(cu[-1] + q_len)
        self.cu_host = cu
        self.cu_seqlens_q = torch.tensor(cu, dtype=torch.int32, device=dev)
        self.seq_lens_k = torch.tensor(case.seq_lens_k, dtype=torch.int32, device=dev)

        def randn(*shape, std=1.0):
            values = torch.randn(*shape, generator=cuda_generator, dtype=torch.float32, device=dev)
            return (values * std).to(bf16)

        cache_shape = (self.num_blocks, PAGE_SIZE, hkv, d)
        self.q = [randn(case.total_q, hq, d, std=q_std) for _ in range(copies)]
        self.k_cache = [randn(*cache_shape) for _ in range(copies)]
        self.v_cache = [randn(*cache_shape) for _ in range(copies)]

    def contiguous_kv(self, copy, seq):
        """K and V of one sequence gathered from the paged cache: [Hkv, L, D] each."""
        length = self.case.seq_lens_k[seq]
        blocks = self.block_table[seq, :blocks_needed(length)].long()
        hkv, d = self.case.num_kv_heads, self.case.head_dim
        k = self.k_cache[copy][blocks].reshape(-1, hkv, d)[:length]
        v = self.v_cache[copy][blocks].reshape(-1, hkv, d)[:length]
        return k.permute(1, 0, 2).contiguous(), v.permute(1, 0, 2).contiguous()

    def q_rows(self, copy, seq):
        return self.q[copy][self.cu_host[seq]:self.cu_host[seq + 1]]


def error_stats(out, ref):
    """rel L2, mean abs, max abs and non-finite count of out against an fp64 reference."""
    torch = _lazy_torch()
    diff = out.double() - ref
    nonfinite = int((~torch.isfinite(diff)).sum().item())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    ref_norm = ref.norm().item()
    return {"rel_l2": diff.norm().item() / ref_norm if ref_norm > 0 else float("inf"),
            "mean_abs": diff.abs().mean().item(), "max_abs": diff.abs().max().item(),
            "nonfinite": nonfinite}


def torch_reference_rows(data, copy=0):
    """fp64 attention of sampled query rows: returns (row indices, [rows, Hq, D] float64)."""
    torch = _lazy_torch()
    case = data.case
    hkv, d, group = case.num_kv_heads, case.head_dim, data.group
    all_rows, outputs = [], []
    for seq, (q_len, ctx) in enumerate(zip(case.q_lens, case.contexts)):
        count = min(q_len, REF_ROWS_PER_SEQ)
        sel = sorted({round(i * (q_len - 1) / max(count - 1, 1)) for i in range(count)})
        sel_t = torch.tensor(sel, device="cuda")
        k, v = data.contiguous_kv(copy, seq)
        k, v = k.double(), v.double()                                  # [Hkv, L, D]
        q = data.q_rows(copy, seq)[sel_t].double().view(len(sel), hkv, group, d)
        scores = torch.einsum("rhgd,hld->hgrl", q, k) * SOFTMAX_SCALE
        keys = torch.arange(k.shape[1], device="cuda")
        visible = keys[None, :] <= (ctx + sel_t)[:, None]               # [r, L]
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.einsum("hgrl,hld->rhgd", probs, v).reshape(len(sel), hkv * group, d)
        all_rows.append(sel_t + data.cu_host[seq])
        outputs.append(out)
    return torch.cat(all_rows), torch.cat(outputs)


class Wideattn:
    """libwideattn through ctypes: availability, params per copy, bf16 and fp64 launches."""

    def __init__(self, lib_path, bundle_dir, bf16_kernel=None):
        self.lib = None
        self.status = STATUS_UNAVAILABLE
        self.detail = ""
        self.kernels = []
        try:
            self.lib = wideattn_ctypes.Library(lib_path, bundle_dir)
            self.kernels = self.lib.kernels()
            if bf16_kernel:  # restricts the bf16 launches only; the fp64 reference selects as usual
                self.lib.set_prefill_kernel(bf16_kernel)
            self.status = STATUS_OK
            self.detail = (f"v{self.lib.version()} bundle {self.lib.bundle_dir()} kernels "
                           f"{[k['name'] + '/' + k['arch'] for k in self.kernels]}")
        except (OSError, wideattn_ctypes.WideattnError) as exc:
            self.detail = f"({exc})"

    def params(self, data, copy, o, lse, o_dtype):
        case = data.case
        q, k, v = data.q[copy], data.k_cache[copy], data.v_cache[copy]
        p = wideattn_ctypes.PrefillParams()
        p.q, p.q_token_stride, p.q_head_stride = q.data_ptr(), q.stride(0), q.stride(1)
        p.k_cache = k.data_ptr()
        p.k_block_stride, p.k_slot_stride, p.k_head_stride = k.stride(0), k.stride(1), k.stride(2)
        p.v_cache = v.data_ptr()
        p.v_block_stride, p.v_slot_stride, p.v_head_stride = v.stride(0), v.stride(1), v.stride(2)
        p.o, p.o_token_stride, p.o_head_stride = o.data_ptr(), o.stride(0), o.stride(1)
        if lse is not None:
            p.lse, p.lse_head_stride = lse.data_ptr(), lse.stride(0)
        p.cu_seqlens_q = data.cu_seqlens_q.data_ptr()
        p.seq_lens_k = data.seq_lens_k.data_ptr()
        p.block_table = data.block_table.data_ptr()
        p.block_table_stride = data.block_table.stride(0)
        p.num_seqs = len(case.q_lens)
        p.total_q = case.total_q
        p.num_q_heads, p.num_kv_heads, p.head_dim = case.num_q_heads, case.num_kv_heads, case.head_dim
        p.block_size, p.num_blocks = PAGE_SIZE, data.num_blocks
        p.q_dtype = p.kv_dtype = wideattn_ctypes.DTYPE_BF16
        p.o_dtype = o_dtype
        p.softmax_scale = SOFTMAX_SCALE
        return p

    def kernel_for(self, params, capability):
        """(kernel name, None) if the bundle serves params on this device, else (None, why)."""
        try:
            index = self.lib.is_supported(params, *capability)
            return self.kernels[index]["name"], None
        except wideattn_ctypes.WideattnError as exc:
            return None, str(exc)

    def launch(self, params):
        self.lib.prefill(params, _lazy_torch().cuda.current_stream().cuda_stream)


def reference_f64(wa, data, capability, log):
    """Full fp64 output from the bundle's reference kernel, or None with the reason."""
    torch = _lazy_torch()
    case = data.case
    o = torch.empty(case.total_q, case.num_q_heads, case.head_dim, dtype=torch.float64, device="cuda")
    lse = torch.empty(case.num_q_heads, case.total_q, dtype=torch.float64, device="cuda")
    params = wa.params(data, 0, o, lse, wideattn_ctypes.DTYPE_F64)
    name, why = wa.kernel_for(params, capability)
    if name is None:
        return None, why
    start = time.time()
    try:
        wa.launch(params)
        torch.cuda.synchronize()
    except wideattn_ctypes.WideattnError as exc:
        return None, str(exc)
    log(f"  fp64 reference ({name}) {time.time() - start:.2f} s")
    return o, None


class Impl:
    """An implementation under test: run(copy) launches once; output() is copy 0's result."""

    def __init__(self, name, run, output, config=None, max_rel_l2=MISMATCH_REL_L2):
        self.name = name
        self.run = run
        self.output = output
        self.config = config
        self.max_rel_l2 = max_rel_l2  # not timed above this relative L2 error


class TritonPeer:
    """The Triton launcher of one case and the output buffer all its configs write."""

    def __init__(self, data):
        torch = _lazy_torch()
        from peers.triton_paged_prefill import PagedPrefill
        case = data.case
        self.data = data
        self.launcher = PagedPrefill(case.q_lens, data.cu_seqlens_q, data.seq_lens_k,
                                     data.block_table, case.num_q_heads, case.num_kv_heads,
                                     PAGE_SIZE, SOFTMAX_SCALE)
        self.o = torch.empty_like(data.q[0])


def make_triton(peer, config):
    torch = _lazy_torch()
    data, launcher, o = peer.data, peer.launcher, peer.o

    def run(copy):
        launcher(data.q[copy], data.k_cache[copy], data.v_cache[copy], o, config)

    def output():
        run(0)
        torch.cuda.synchronize()
        return o

    return run, output


def make_sdpa(data, expanded):
    """SDPA per sequence on contiguous K/V prepared here (untimed), bottom-right causal."""
    torch = _lazy_torch()
    import torch.nn.functional as F
    case = data.case
    per_copy = []
    for copy in range(data.copies):
        seqs = []
        for seq, (q_len, ctx) in enumerate(zip(case.q_lens, case.contexts)):
            k, v = data.contiguous_kv(copy, seq)
            if expanded:
                k = k.repeat_interleave(data.group, dim=0)
                v = v.repeat_interleave(data.group, dim=0)
            q = data.q_rows(copy, seq).transpose(0, 1).unsqueeze(0)        # [1, Hq, q, D] view
            mask = None
            if ctx:
                keys = torch.arange(q_len + ctx, device="cuda")
                mask = keys[None, :] <= (ctx + torch.arange(q_len, device="cuda"))[:, None]
            seqs.append((q, k.unsqueeze(0), v.unsqueeze(0), mask))
        per_copy.append(seqs)

    def run(copy, keep=False):
        outs = []
        for q, k, v, mask in per_copy[copy]:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                 scale=SOFTMAX_SCALE, enable_gqa=not expanded)
            if keep:
                outs.append(out)
        return outs

    def output():
        outs = run(0, keep=True)
        return torch.cat([out[0].transpose(0, 1) for out in outs], dim=0)

    return run, output


def probe_sdpa_backends():
    """SDPA backends that accept a D=512 GQA call (enable_gqa) and an expanded-KV call."""
    torch = _lazy_torch()
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    tokens = 64
    q = torch.randn(1, NUM_Q_HEADS, tokens, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    kv = torch.randn(1, NUM_KV_HEADS, tokens, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    kv_expanded = kv.repeat_interleave(NUM_Q_HEADS // NUM_KV_HEADS, dim=1)
    result = {"gqa": [], "expanded": []}
    backends = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    for backend in backends:
        for key, k, gqa in (("gqa", kv, True), ("expanded", kv_expanded, False)):
            try:
                with sdpa_kernel([backend]), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=gqa)
                torch.cuda.synchronize()
                result[key].append(backend.name.lower())
            except RuntimeError:
                pass
    return result


def is_oom(exc):
    torch = _lazy_torch()
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc)


def time_interleaved(impls, reps, warmup, copies, budget_s, ran_after=None):
    """Interleaved CUDA-event timing: the implementations run in the cyclic order of
    balanced_sequence, repeated until each has its repetitions, so every one is timed right after
    every other one equally often (after a long, power-hungry kernel the GPU's power controller
    still holds the clock down for the next one). The warm-ups end with the sequence's last
    item, so the first timed run's predecessor keeps the balance too.

    Returns ({name: [ms, ...]}, {name: status}) where the second dict names the
    implementations that ran out of memory or raised (they are dropped from then on). When
    ran_after is a dict, it receives {name: [the implementation launched right before each
    timed run, ...]} (the last warm-up's for the first), in the order of the times.
    """
    torch = _lazy_torch()
    failed = {}

    def attempt(impl, copy):
        try:
            impl.run(copy)
            return True
        except Exception as exc:  # out of memory or a launch error: drop this implementation
            failed[impl.name] = STATUS_OOM if is_oom(exc) else \
                f"{STATUS_FAILED}: {type(exc).__name__}: {str(exc)[:200]}"
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            return False

    sequence = balanced_sequence(impls)
    warm_order = [impl for impl in impls if impl is not sequence[-1]] + [sequence[-1]] if impls else []
    counts = {}
    previous = None
    for impl in warm_order:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for i in range(warmup):
            start.record()
            previous = impl.name
            if not attempt(impl, i % copies):
                break
            end.record()
        estimate = 0.0
        if warmup and impl.name not in failed:
            end.synchronize()
            estimate = start.elapsed_time(end)
        counts[impl.name] = budget_reps(reps, estimate, budget_s)
    events = {impl.name: [] for impl in impls}
    runs = 0
    while any(len(events[impl.name]) < counts[impl.name] and impl.name not in failed for impl in impls):
        for impl in sequence:
            done = len(events[impl.name])
            if done >= counts[impl.name] or impl.name in failed:
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            before, previous = previous, impl.name
            if attempt(impl, done % copies):
                end.record()
                events[impl.name].append((start, end))
                if ran_after is not None:
                    ran_after.setdefault(impl.name, []).append(before)
            runs += 1
            if runs % len(impls) == 0:
                torch.cuda.synchronize()
    torch.cuda.synchronize()
    times = {name: [s.elapsed_time(e) for s, e in pairs]
             for name, pairs in events.items() if name not in failed and pairs}
    return times, failed


def tune_triton(peer, check, log, space=None):
    """Best Triton config for this case by timing, of `space` (None: the prefill peer's
    tuning_space); every candidate is also checked for accuracy."""
    torch = _lazy_torch()
    from peers.triton_paged_prefill import tuning_space
    results = []
    data = peer.data
    for config in (tuning_space(data.group) if space is None else space):
        entry = {"config": config.label()}
        try:
            run, output = make_triton(peer, config)
            err = check(output())
            entry["rel_l2"] = err["rel_l2"]
            if not err["rel_l2"] <= MISMATCH_REL_L2:
                entry["status"] = STATUS_MISMATCH
            else:
                times, _ = time_interleaved([Impl(entry["config"], run, output)],
                                            TUNE_SCREEN_REPS, 0, data.copies, None)
                times = times[entry["config"]]
                entry.update(status=STATUS_OK, ms=min(times), _run=run, _output=output,
                             _config=config)
        except Exception as exc:  # compile errors, shared memory / register limits
            torch.cuda.synchronize()
            entry.update(status=STATUS_FAILED, reason=f"{type(exc).__name__}: {str(exc)[:120]}")
        results.append(entry)
    ok = sorted((e for e in results if e["status"] == STATUS_OK), key=lambda e: e["ms"])
    for entry in ok[:TUNE_FINALISTS]:
        times, _ = time_interleaved([Impl(entry["config"], entry["_run"], entry["_output"])],
                                    TUNE_FINAL_REPS, 0, data.copies, None)
        entry["ms"] = statistics.median(times[entry["config"]])
    finalists = sorted(ok[:TUNE_FINALISTS], key=lambda e: e["ms"])
    failed = [e for e in results if e["status"] != STATUS_OK]
    log(f"  tuning: {len(ok)} configs ran, {len(failed)} skipped"
        + (f"; best {finalists[0]['config']} {finalists[0]['ms']:.3f} ms" if finalists else ""))
    table = [{k: v for k, v in e.items() if not k.startswith("_")} for e in results]
    return (finalists[0] if finalists else None), table


def measure_gemm_rate():
    torch = _lazy_torch()
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, dtype=torch.bfloat16, device="cuda")
    run = Impl("gemm", lambda _copy: torch.matmul(a, b), None)
    times, _ = time_interleaved([run], GEMM_REPS, DEFAULT_WARMUP, 1, None)
    times = times["gemm"]
    return 2 * GEMM_SIZE ** 3 / (statistics.median(times) * 1e-3) / 1e12


def wideattn_impl(name, wa, data, copies, capability, result, log, skip_kernel=None):
    """The Impl of one libwideattn context (None when unavailable or running `skip_kernel`)."""
    torch = _lazy_torch()
    if wa.status != STATUS_OK:
        result["impls"][name] = {"status": STATUS_UNAVAILABLE}
        return None
    o = torch.empty_like(data.q[0])
    params = [wa.params(data, c, o, None, wideattn_ctypes.DTYPE_BF16) for c in range(copies)]
    kernel, why = wa.kernel_for(params[0], capability)
    if kernel is None:
        log(f"  {name} unavailable: {why}")
        result["impls"][name] = {"status": STATUS_UNAVAILABLE, "reason": why}
        return None
    if kernel == skip_kernel:
        log(f"  {name}: the dispatcher already runs {kernel}")
        return None

    def output():
        wa.launch(params[0])
        torch.cuda.synchronize()
        return o

    return Impl(name, lambda c: wa.launch(params[c]), output, config=kernel)


def case_reference(wa, data, capability, result, log):
    """(rows, reference) to check outputs against: the fp64 kernel's output of every row (rows
    None) when it runs, else torch float64 on sampled query rows; recorded in result."""
    ref_rows, ref = None, None
    if wa.status == STATUS_OK:
        ref, why = reference_f64(wa, data, capability, log)
        if ref is None:
            log(f"  fp64 reference kernel unavailable: {why}")
    if ref is not None:
        result["reference"] = "wideattn reference_f64 kernel (all rows)"
        rows, sampled = torch_reference_rows(data)
        result["reference_check"] = error_stats(ref[rows], sampled)
        log(f"  fp64 kernel vs torch fp64 on {rows.numel()} rows: "
            f"rel L2 {result['reference_check']['rel_l2']:.1e}")
    else:
        ref_rows, ref = torch_reference_rows(data)
        result["reference"] = f"torch float64 on {ref_rows.numel()} sampled query rows"
        log(f"  reference: {result['reference']}")
    return ref_rows, ref


def case_candidates(impls_wanted, wa, wa_mma, data, copies, capability, result, check, log):
    """(candidates, triton_peer): the wanted implementations that could be built for the case;
    those that could not (tuning failed, out of memory) are recorded in result["impls"]."""
    torch = _lazy_torch()
    candidates = []
    default_kernel = None
    if IMPL_WIDEATTN in impls_wanted:
        impl = wideattn_impl(IMPL_WIDEATTN, wa, data, copies, capability, result, log)
        if impl is not None:
            candidates.append(impl)
            default_kernel = impl.config
    if IMPL_WIDEATTN_MMA in impls_wanted and wa_mma is not None:
        impl = wideattn_impl(IMPL_WIDEATTN_MMA, wa_mma, data, copies, capability, result, log,
                             skip_kernel=default_kernel)
        if impl is not None:
            candidates.append(impl)
    triton_peer = TritonPeer(data) if {IMPL_TRITON_ENGINE, IMPL_TRITON_TUNED} & set(impls_wanted) \
        else None
    if IMPL_TRITON_ENGINE in impls_wanted:
        from peers.triton_paged_prefill import ENGINE_CONFIG
        run, output = make_triton(triton_peer, ENGINE_CONFIG)
        candidates.append(Impl(IMPL_TRITON_ENGINE, run, output, config=ENGINE_CONFIG.label()))
    if IMPL_TRITON_TUNED in impls_wanted:
        best, tuning = tune_triton(triton_peer, check, log)
        result["tuning"] = tuning
        if best is None:
            result["impls"][IMPL_TRITON_TUNED] = {"status": STATUS_FAILED}
        else:
            candidates.append(Impl(IMPL_TRITON_TUNED, best["_run"], best["_output"],
                                   config=best["config"]))
    for name, expanded in ((IMPL_SDPA, False), (IMPL_SDPA_EXPANDED, True)):
        if name in impls_wanted:
            try:
                run, output = make_sdpa(data, expanded)
                candidates.append(Impl(name, run, output))
            except Exception as exc:
                if not is_oom(exc):
                    raise
                result["impls"][name] = {"status": STATUS_OOM}
                torch.cuda.empty_cache()
    return candidates, triton_peer


def cross_check(candidates, check, result):
    """Each candidate's output against the reference, recorded in result["impls"]; returns the
    ones that match (to be timed)."""
    torch = _lazy_torch()
    timed = []
    for impl in candidates:
        entry = {"status": STATUS_OK, "config": impl.config}
        try:
            out = impl.output()
            entry["error"] = check(out)
            del out
            if not entry["error"]["rel_l2"] <= impl.max_rel_l2:
                entry["status"] = STATUS_MISMATCH
            else:
                timed.append(impl)
        except Exception as exc:
            if isinstance(exc, wideattn_ctypes.WideattnError):
                entry.update(status=STATUS_FAILED, reason=str(exc))
            elif is_oom(exc):
                entry["status"] = STATUS_OOM
            else:
                entry.update(status=STATUS_FAILED, reason=f"{type(exc).__name__}: {exc}"[:300])
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        result["impls"][impl.name] = entry
    return timed


def record_times(case, timed, args, copies, rates, result, log):
    """Times the matching implementations interleaved and records each one's figures."""
    ran_after = {}
    times, failed = time_interleaved(timed, args.reps, args.warmup, copies, args.impl_budget_s, ran_after) \
        if timed else ({}, {})
    for name, status in failed.items():
        result["impls"][name]["status"] = status
    for name, samples in times.items():
        entry = result["impls"][name]
        entry.update(summarize_times(samples))
        entry["ran_after"] = ran_after.get(name, [])
        entry["tflops"] = tflops(case.flops, entry["ms_median"])
        entry["pct_gemm"] = 100 * entry["tflops"] / rates["gemm_tflops"]
        if rates.get("mma_tflops"):
            entry["pct_mma"] = 100 * entry["tflops"] / rates["mma_tflops"]
    log("  median ms: " + ", ".join(
        f"{name} {result['impls'][name]['ms_median']:.3f}" for name in times))


def run_case(case, args, wa, wa_mma, capability, l2_bytes, generators, rates, log):
    """Builds one case, cross-checks every implementation, times the survivors."""
    torch = _lazy_torch()
    torch.cuda.empty_cache()
    q_bytes = case.total_q * case.num_q_heads * case.head_dim * 2
    kv_bytes = 2 * sum(blocks_needed(n) for n in case.seq_lens_k) * PAGE_SIZE \
        * case.num_kv_heads * case.head_dim * 2
    copies = input_copies(2 * q_bytes + kv_bytes, l2_bytes)
    data = CaseData(case, copies, args.q_std, generators)
    log(f"{case.name}: {case.shape()}  {case.flops / 1e12:.2f} TFLOP  copies {copies}")
    impls_wanted = [name for name in args.impls.split(",") if name]
    result = {"name": case.name, "q_lens": list(case.q_lens), "contexts": list(case.contexts),
              "num_q_heads": case.num_q_heads, "num_kv_heads": case.num_kv_heads,
              "head_dim": case.head_dim, "page_size": PAGE_SIZE, "num_blocks": data.num_blocks,
              "flops": case.flops, "copies": copies, "impls": {}}
    ref_rows, ref = case_reference(wa, data, capability, result, log)

    def check(out):
        return error_stats(out if ref_rows is None else out[ref_rows], ref)

    candidates, triton_peer = case_candidates(impls_wanted, wa, wa_mma, data, copies, capability,
                                              result, check, log)
    timed = cross_check(candidates, check, result)
    ref = None  # the fp64 reference is not needed while timing; free its memory
    errs = {n: e["error"] for n, e in result["impls"].items() if "error" in e}
    log("  accuracy (mean/max abs): " + ", ".join(
        f"{n} {e['mean_abs']:.1e}/{e['max_abs']:.1e}" for n, e in errs.items()))
    record_times(case, timed, args, copies, rates, result, log)
    ordered = {name: result["impls"][name] for name in ALL_IMPLS if name in result["impls"]}
    result["impls"] = ordered
    del data, candidates, timed, triton_peer
    torch.cuda.empty_cache()
    return result


def run_gpu_suite(args, log):
    torch = _lazy_torch()
    import triton
    torch.cuda.init()
    torch.zeros(1, device="cuda")           # creates the primary context wideattn launches in
    props = torch.cuda.get_device_properties(0)
    capability = torch.cuda.get_device_capability(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 * 2 ** 20)
    report = {"environment": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": props.name, "capability": list(capability), "l2_bytes": l2_bytes,
        "torch": torch.__version__, "triton": triton.__version__, "commit": args.commit,
        "quick": args.quick, "reps": args.reps, "warmup": args.warmup, "q_std": args.q_std,
        "impl_budget_s": args.impl_budget_s, "seed": args.seed, "kernel": args.kernel},
        "impl_notes": IMPL_NOTES}
    wa = Wideattn(args.lib, args.bundle, args.kernel)
    # The mma tier by name in the same process, when the bundle has it and --kernel does not
    # already pin it (on sm_90 the dispatcher runs the Hopper tier).
    wa_mma = None
    if IMPL_WIDEATTN_MMA in args.impls.split(",") and args.kernel != MMA_TIER_KERNEL and \
            any(k["name"] == MMA_TIER_KERNEL for k in wa.kernels):
        wa_mma = Wideattn(args.lib, args.bundle, MMA_TIER_KERNEL)
    report["wideattn"] = {"status": wa.status, "detail": wa.detail, "kernels": wa.kernels}
    rates = {"gemm_tflops": measure_gemm_rate(), "mma_tflops": args.mma_rate}
    report["rates"] = rates
    report["sdpa_backends"] = probe_sdpa_backends()
    report["cases"] = []
    log(format_header(report))
    generator = (torch.Generator().manual_seed(args.seed),
                 torch.Generator(device="cuda").manual_seed(args.seed))
    for case in select_cases(build_suite(args.quick), args.cases):
        report["cases"].append(run_case(case, args, wa, wa_mma, capability, l2_bytes, generator, rates,
                                        log))
        if args.json:
            write_json(args.json, report)
    return report


# ----------------------------------------------------------------------------- decode mode: GPU part


class DecodeCaseData(CaseData):
    """CaseData whose K/V caches hold e4m3-representable values: the random bf16 caches are
    quantised to e4m3 codes (k_e4m3 / v_e4m3, scale E4M3_SCALE) and replaced by their exact
    dequantisation, so bf16 and e4m3 implementations read the same values and share one fp64
    reference. The unquantised caches of copy 0 are kept (k_source / v_source) for the second
    reference: the attention of the values the cache was quantised from."""

    def __init__(self, case, copies, q_std, generators):
        super().__init__(case, copies, q_std, generators)
        torch = _lazy_torch()
        self.k_source, self.v_source = self.k_cache[0].clone(), self.v_cache[0].clone()
        self.k_e4m3, self.v_e4m3 = [], []
        for copy in range(copies):
            for caches, codes in ((self.k_cache, self.k_e4m3), (self.v_cache, self.v_e4m3)):
                code = (caches[copy].float() / E4M3_SCALE).to(torch.float8_e4m3fn)
                codes.append(code)
                caches[copy] = (code.float() * E4M3_SCALE).to(torch.bfloat16)
        self.kv_scale = torch.tensor([E4M3_SCALE], dtype=torch.float32, device="cuda")
        self.v_e4m3_t = []   # transposed_v_codes of v_e4m3, made by the first implementation reading it

    def transposed_v(self):
        if not self.v_e4m3_t:
            self.v_e4m3_t = [transposed_v_codes(codes) for codes in self.v_e4m3]
        return self.v_e4m3_t


def transposed_v_codes(codes):
    """An e4m3 V cache [num_blocks, PAGE_SIZE, Hkv, D] moved into the transposed V layout
    [num_blocks, Hkv, D, PAGE_SIZE] (slot s at v_slot_position(s)): the same codes, none
    recomputed, so both layouts dequantise to the values of the one fp64 reference."""
    torch = _lazy_torch()
    positions = torch.tensor([v_slot_position(s) for s in range(codes.shape[1])], dtype=torch.int64,
                             device=codes.device)
    moved = codes.view(torch.uint8).permute(0, 2, 3, 1)
    out = torch.empty(moved.shape, dtype=torch.uint8, device=codes.device)
    out[..., positions] = moved
    return out.view(codes.dtype)


def decode_params(wa, data, copy, o, e4m3, v_transposed=False):
    """wideattn params of one copy with the split hints (max_seqlen_q / max_seqlen_k); for e4m3
    the e4m3 caches and their scales; v_transposed (e4m3 only): V from data.transposed_v() with
    WIDEATTN_FLAG_V_TRANSPOSED and that layout's strides."""
    case = data.case
    p = wa.params(data, copy, o, None, wideattn_ctypes.DTYPE_BF16)
    if e4m3:
        p.k_cache, p.v_cache = data.k_e4m3[copy].data_ptr(), data.v_e4m3[copy].data_ptr()
        p.kv_dtype = wideattn_ctypes.DTYPE_E4M3
        p.k_scale = p.v_scale = data.kv_scale.data_ptr()
    if v_transposed:
        v = data.transposed_v()[copy]
        p.v_cache = v.data_ptr()
        p.v_block_stride, p.v_slot_stride, p.v_head_stride = v.stride(0), 1, v.stride(1)
        p.flags |= wideattn_ctypes.FLAG_V_TRANSPOSED
    p.max_seqlen_q = max(case.q_lens)
    p.max_seqlen_k = max(case.seq_lens_k)
    return p


def wideattn_decode_impl(name, wa, data, env, result, log):
    """The Impl of wideattn on one case (bf16 or e4m3 K/V) with the workspace
    wideattn_workspace_size asks for (allocated once, outside timing), or None."""
    torch = _lazy_torch()
    if wa.status != STATUS_OK:
        result["impls"][name] = {"status": STATUS_UNAVAILABLE}
        return None
    e4m3 = name in (IMPL_WIDEATTN_E4M3, IMPL_WIDEATTN_E4M3_VT)
    o = torch.empty_like(data.q[0])
    params = [decode_params(wa, data, c, o, e4m3, name == IMPL_WIDEATTN_E4M3_VT) for c in range(data.copies)]
    kernel, why = wa.kernel_for(params[0], env["capability"])
    workspace = None
    if kernel is not None:
        try:
            size = wa.lib.workspace_size(params[0])
            workspace = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
            for p in params:
                p.workspace, p.workspace_bytes = (workspace.data_ptr(), size) if size else (None, 0)
            capability = env["capability"]
            splits = wa.lib.plan_launch(params[0], capability[0], capability[1], env["num_sms"]).num_splits
        except wideattn_ctypes.WideattnError as exc:
            kernel, why = None, f"split-KV API: {exc}"
    if kernel is None:
        log(f"  {name} unavailable: {why}")
        result["impls"][name] = {"status": STATUS_UNAVAILABLE, "reason": why}
        return None
    result.setdefault("wideattn_launch", {})[name] = {"kernel": kernel, "num_splits": splits,
                                                      "workspace_bytes": params[0].workspace_bytes}

    def output():
        wa.launch(params[0])
        torch.cuda.synchronize()
        return o

    impl = Impl(name, lambda c: wa.launch(params[c]), output, config=f"{kernel} splits {splits}",
                max_rel_l2=MISMATCH_REL_L2_E4M3 if e4m3 else MISMATCH_REL_L2)
    impl.workspace = workspace  # lives as long as the launches that point at it
    return impl


def triton_decode_impl(name, data, env, result, log):
    """The engine's Triton attention on one case: the split-KV decode kernel for sequences of
    1..MAX_Q_LEN tokens and the Triton prefill kernel (engine config) for longer ones; e4m3 only
    for decode-only batches (the prefill peer reads bf16). None when it cannot run the case."""
    torch = _lazy_torch()
    from peers.triton_paged_decode import ENGINE_CONFIG, MAX_Q_LEN, PagedDecode
    from peers.triton_paged_prefill import ENGINE_CONFIG as PREFILL_CONFIG, PagedPrefill
    case = data.case
    e4m3 = name == IMPL_TRITON_DECODE_E4M3
    long_q = tuple(q if q > MAX_Q_LEN else 0 for q in case.q_lens)
    if e4m3 and any(long_q):
        result["impls"][name] = {"status": STATUS_UNAVAILABLE,
                                 "reason": f"sequences over {MAX_Q_LEN} tokens need the bf16 prefill peer"}
        return None
    decode = None
    if any(0 < q <= MAX_Q_LEN for q in case.q_lens):
        decode = PagedDecode(case.q_lens, data.cu_seqlens_q, data.seq_lens_k, data.block_table, case.num_q_heads,
                             case.num_kv_heads, case.head_dim, PAGE_SIZE, SOFTMAX_SCALE, env["num_sms"])
    prefill = PagedPrefill(long_q, data.cu_seqlens_q, data.seq_lens_k, data.block_table, case.num_q_heads,
                           case.num_kv_heads, PAGE_SIZE, SOFTMAX_SCALE) if any(long_q) else None
    o = torch.empty_like(data.q[0])
    k_caches, v_caches = (data.k_e4m3, data.v_e4m3) if e4m3 else (data.k_cache, data.v_cache)

    def run(c):
        if prefill is not None:
            prefill(data.q[c], data.k_cache[c], data.v_cache[c], o, PREFILL_CONFIG)
        if decode is not None:
            decode(data.q[c], k_caches[c], v_caches[c], o, ENGINE_CONFIG, data.kv_scale, data.kv_scale)

    def output():
        run(0)
        torch.cuda.synchronize()
        return o

    parts = ([decode.label(ENGINE_CONFIG)] if decode else []) + \
        ([f"prefill {PREFILL_CONFIG.label()}"] if prefill else [])
    return Impl(name, run, output, config=" + ".join(parts),
                max_rel_l2=MISMATCH_REL_L2_E4M3 if e4m3 else MISMATCH_REL_L2)


def rows16_space(group):
    """The 16-row peer's configurations (packed heads, block_m ROWS16_BLOCK_M), for GQA group `group`."""
    from peers.triton_paged_prefill import Config
    if ROWS16_BLOCK_M % group:
        return []
    return [Config(ROWS16_BLOCK_M, n, w, s, pack_heads=True)
            for n in ROWS16_BLOCK_N for w in ROWS16_WARPS for s in ROWS16_STAGES]


def triton_rows16_impl(name, data, check, result, log):
    """The 16-row Triton peer on one case (DECODE_IMPL_NOTES) at the best configuration of
    rows16_space, searched here (the search's table goes into the case's JSON as rows16_tuning),
    or None when no configuration ran within the accuracy bound."""
    space = rows16_space(data.group)
    if not space:
        result["impls"][name] = {"status": STATUS_UNAVAILABLE,
                                 "reason": f"GQA group {data.group} does not divide {ROWS16_BLOCK_M} rows"}
        return None
    best, table = tune_triton(TritonPeer(data), check, log, space=space)
    result["rows16_tuning"] = table
    if best is None:
        result["impls"][name] = {"status": STATUS_FAILED, "reason": "no configuration ran within the accuracy bound"}
        return None
    return Impl(name, best["_run"], best["_output"], config=best["config"])


def measure_copy_bandwidth():
    """GB/s of a COPY_BYTES device-to-device copy (read + write), median of COPY_REPS."""
    torch = _lazy_torch()
    src = torch.ones(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    run = Impl("copy", lambda _copy: dst.copy_(src), None)
    times, _ = time_interleaved([run], COPY_REPS, COPY_WARMUP, 1, None)
    ms = statistics.median(times["copy"])
    del src, dst
    torch.cuda.empty_cache()
    return copy_gbps(COPY_BYTES, ms)


def record_decode_times(case, timed, args, copies, result, log):
    """Times the matching implementations interleaved; ms, GB/s of K/V read and speedups."""
    ran_after = {}
    times, failed = time_interleaved(timed, args.reps, args.warmup, copies, args.impl_budget_s, ran_after) \
        if timed else ({}, {})
    for name, status in failed.items():
        result["impls"][name]["status"] = status
    for name, samples in times.items():
        entry = result["impls"][name]
        entry.update(summarize_times(samples))
        entry["ran_after"] = ran_after.get(name, [])
        entry["kv_bytes"] = kv_read_bytes(case, 1 if name in E4M3_IMPLS else 2)
        entry["gbps"] = gbps(entry["kv_bytes"], entry["ms_median"])
        entry["tflops"] = tflops(case.flops, entry["ms_median"])
    fill_speedups(result)
    log("  median ms: " + ", ".join(f"{name} {result['impls'][name]['ms_median']:.3f}" for name in times))


def source_reference(wa, data, capability, result, log):
    """(rows, reference) of case_reference on copy 0 with its unquantised caches (data.k_source /
    v_source) in place of the dequantised ones: the attention an e4m3 cache approximates, quantisation
    error included; recorded in result as source_reference."""
    dequantised = data.k_cache[0], data.v_cache[0]
    data.k_cache[0], data.v_cache[0] = data.k_source, data.v_source
    try:
        record = {}
        rows, ref = case_reference(wa, data, capability, record, lambda message: None)
        result["source_reference"] = record["reference"] + ", unquantised K/V"
    finally:
        data.k_cache[0], data.v_cache[0] = dequantised
    return rows, ref


def run_decode_case(case, args, wa, env, generators, log):
    """Builds one decode case, cross-checks every implementation against the fp64 reference of
    the dequantised inputs, times the survivors."""
    torch = _lazy_torch()
    torch.cuda.empty_cache()
    # K and V, each as bf16 (2 bytes) and as e4m3 codes (1 byte).
    kv_bytes = 2 * sum(blocks_needed(n) for n in case.seq_lens_k) * PAGE_SIZE * case.num_kv_heads * case.head_dim * 3
    copies = input_copies(kv_bytes, env["l2_bytes"])
    data = DecodeCaseData(case, copies, args.q_std, generators)
    log(f"{case.name}: {case.shape()}  K/V {kv_read_bytes(case, 2) / 1e9:.2f} GB bf16  copies {copies}")
    result = {"name": case.name, "q_lens": list(case.q_lens), "contexts": list(case.contexts),
              "num_q_heads": case.num_q_heads, "num_kv_heads": case.num_kv_heads, "head_dim": case.head_dim,
              "page_size": PAGE_SIZE, "num_blocks": data.num_blocks, "flops": case.flops, "copies": copies,
              "e4m3_scale": E4M3_SCALE, "impls": {}}
    ref_rows, ref = case_reference(wa, data, env["capability"], result, log)
    source_rows, source_ref = source_reference(wa, data, env["capability"], result, log)

    def check(out):
        stats = error_stats(out if ref_rows is None else out[ref_rows], ref)
        stats["vs_source"] = error_stats(out if source_rows is None else out[source_rows], source_ref)
        return stats

    candidates = []
    for name in [impl for impl in DECODE_IMPLS if impl in args.impls.split(",")]:
        if name in WIDEATTN_DECODE_IMPLS:
            impl = wideattn_decode_impl(name, wa, data, env, result, log)
        elif name == IMPL_TRITON_ROWS16:
            impl = triton_rows16_impl(name, data, check, result, log)
        else:
            impl = triton_decode_impl(name, data, env, result, log)
        if impl is not None:
            candidates.append(impl)
    timed = cross_check(candidates, check, result)
    ref = source_ref = None
    fill_error_ratios(result)
    record_decode_times(case, timed, args, copies, result, log)
    result["impls"] = {name: result["impls"][name] for name in DECODE_IMPLS if name in result["impls"]}
    del data, candidates, timed
    torch.cuda.empty_cache()
    return result


def run_decode_suite(args, log):
    torch = _lazy_torch()
    import triton
    torch.cuda.init()
    torch.zeros(1, device="cuda")           # creates the primary context wideattn launches in
    props = torch.cuda.get_device_properties(0)
    env = {"capability": torch.cuda.get_device_capability(0), "num_sms": props.multi_processor_count,
           "l2_bytes": getattr(props, "L2_cache_size", 50 * 2 ** 20)}
    report = {"environment": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": props.name, "capability": list(env["capability"]), "num_sms": env["num_sms"],
        "l2_bytes": env["l2_bytes"], "torch": torch.__version__, "triton": triton.__version__,
        "commit": args.commit, "mode": MODE_DECODE, "quick": args.quick, "reps": args.reps,
        "warmup": args.warmup, "q_std": args.q_std, "impl_budget_s": args.impl_budget_s, "seed": args.seed},
        "impl_notes": DECODE_IMPL_NOTES}
    wa = Wideattn(args.lib, args.bundle)
    report["wideattn"] = {"status": wa.status, "detail": wa.detail, "kernels": wa.kernels}
    report["rates"] = {"copy_bytes": COPY_BYTES, "copy_gbps_before": measure_copy_bandwidth()}
    report["cases"] = []
    log(format_decode_header(report))
    generator = (torch.Generator().manual_seed(args.seed), torch.Generator(device="cuda").manual_seed(args.seed))
    for case in select_cases(build_decode_suite(args.quick), args.cases):
        report["cases"].append(run_decode_case(case, args, wa, env, generator, log))
        if args.json:
            write_json(args.json, report)
    report["rates"]["copy_gbps_after"] = measure_copy_bandwidth()
    fill_copy_percentages(report)
    report["mixed_ratios"] = mixed_ratios(report)
    return report


def write_json(path, report):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)


def usage_errors(args):
    """The usage errors of parsed arguments, each naming the option and its value."""
    errors = []
    known = DECODE_IMPLS if args.mode == MODE_DECODE else ALL_IMPLS
    unknown = [name for name in args.impls.split(",") if name and name not in known]
    if unknown or not any(args.impls.split(",")):
        errors.append(f"--impls='{args.impls}': unknown or no implementation(s) {unknown}; "
                      f"known for --mode {args.mode}: {list(known)}")
    try:
        select_cases(suite_for(args.mode, args.quick), args.cases)
    except ValueError as exc:
        errors.append(f"--cases='{args.cases}': {exc}")
    if args.reps < 1:
        errors.append(f"--reps='{args.reps}' is not >= 1")
    if args.warmup < 0:
        errors.append(f"--warmup='{args.warmup}' is not >= 0")
    if args.impl_budget_s is not None and not args.impl_budget_s > 0:
        errors.append(f"--impl-budget-s='{args.impl_budget_s}' is not > 0")
    if args.mode == MODE_DECODE and args.kernel:
        errors.append(f"--kernel='{args.kernel}' does not apply to --mode decode (the dispatcher picks "
                      "the kernel of each K/V dtype)")
    return errors


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--mode", choices=(MODE_PREFILL, MODE_DECODE), default=MODE_PREFILL,
                        help="prefill: the prefill suite against SDPA and the Triton prefill peer; decode: "
                             "the decode suite (" + ", ".join(case.name for case in build_decode_suite())
                             + ") with bf16 and e4m3 K/V against the Triton split-KV decode peer and the 16-row "
                             "Triton peer, in GB/s "
                             "of K/V read and %% of the copy bandwidth measured in the same run")
    parser.add_argument("--lib", default="build/dispatch/libwideattn.so",
                        help="path of libwideattn.so; if it fails to load, wideattn is reported "
                             "'unavailable' and the peers still run")
    parser.add_argument("--bundle", default="build/bundle",
                        help="bundle directory (cubins + manifest.json) passed to wideattn_open")
    parser.add_argument("--kernel", default=None,
                        help="run this bf16 prefill kernel of the bundle (e.g. mma_bf16_d512) instead of "
                             "the one the dispatcher picks (prefill mode)")
    parser.add_argument("--cases", default="",
                        help="comma-separated case names of the mode's suite to run (default: all): "
                             + ", ".join(case.name for case in build_suite()))
    parser.add_argument("--quick", action="store_true",
                        help=f"divide every token count by {QUICK_SCALE} (validation run; decode mode: "
                             "contexts and the chunk)")
    parser.add_argument("--impls", default=None,
                        help="comma-separated implementations to run (default: all of the mode's: "
                             f"prefill {','.join(ALL_IMPLS)}; decode {','.join(DECODE_IMPLS)})")
    parser.add_argument("--reps", type=int, default=DEFAULT_REPS,
                        help="timed repetitions per implementation (median reported)")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                        help="untimed runs per implementation before timing")
    parser.add_argument("--impl-budget-s", type=float, default=None,
                        help="cap each implementation's timed seconds per case; a slow one then "
                             f"gets fewer reps (at least {MIN_BUDGET_REPS}, flagged reps=N)")
    parser.add_argument("--mma-rate", type=float, default=None,
                        help="mma.sync bf16 TFLOP/s measured by the C++ bench; adds the %%mma "
                             "column (omitted when not given)")
    parser.add_argument("--q-std", type=float, default=DEFAULT_Q_STD,
                        help="standard deviation of q (K and V are standard normal); the default "
                             "gives scores of unit variance at scale 1.0")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input generator")
    parser.add_argument("--commit", default=None, help="git commit to record in the JSON report")
    parser.add_argument("--json", default=None, help="write the JSON report to this path")
    args = parser.parse_args(argv)
    if args.impls is None:
        args.impls = ",".join(DECODE_IMPLS if args.mode == MODE_DECODE else ALL_IMPLS)
    errors = usage_errors(args)
    if errors:
        parser.error("; ".join(errors))
    return args


def main(argv=None):
    args = parse_args(argv)

    def log(message):
        print(message, flush=True)

    if args.mode == MODE_DECODE:
        report = run_decode_suite(args, log)
        print()
        print(format_decode_header(report))
        print(format_decode_table(report))
    else:
        report = run_gpu_suite(args, log)
        print()
        print(format_header(report))
        print(format_table(report))
    if args.json:
        write_json(args.json, report)
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
