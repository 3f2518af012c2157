#!/usr/bin/env python3
"""End-to-end logit drift of 8-bit wideattn attention in a small Gemma-4-style decoder.

One device call on an H200 runs everything:

    python3 tools/bench/e2e_drift.py                # writes to $OUT (or ./e2e_out)
    python3 tools/bench/e2e_drift.py --e4m3-kernel wgmma_e4m3alt_d512   # gate one kernel by name

The model: a decoder in PyTorch whose every attention layer is a Gemma 4 "global" layer (head
dim 512, GQA group 8, QK-norm, scale 1.0, partial RoPE on 25% of the dims, K and V from one
projection: K gets k_norm + RoPE, V gets v_norm only), sandwich RMSNorms, a GeGLU MLP, an
untied LM head over a 32768-token vocabulary and a final logit softcap of 30. Weights are
random with a fixed seed and scaled so that the next-token distributions are peaked like a
trained model's (see `build_model`); the script prints the mean top-1 probability and entropy.

The same random tokens (a varlen batch, prefill, causal) run through nine variants:

    reference  (a)  BF16 weights  + BF16 attention (wideattn's bf16 kernel through ctypes:
                    wgmma_bf16c2p_d512 on sm_90, mma_bf16_d512 elsewhere)
    baseline   (b)  e4m3 weights  + BF16 attention
    candidate  (c)  e4m3 weights  + wideattn 8-bit attention (e4m3 K/V cache, per-tensor scales)
    broken     (d)  e4m3 weights  + a deliberately broken 8-bit attention, emulated in PyTorch:
                    the P scale inverted (P / 256 instead of P * 256 before the e4m3 cast), so
                    every probability lands in e4m3's subnormal range (spacing 2^-9) and most
                    flush to 0. (P cast with no scale at all was the first choice; on this model
                    it measured the correct emulation's drift, mean KL 0.0899 vs 0.0903, so it
                    tests nothing.)
    emulated   (e)  e4m3 weights  + the same emulation done right (P scaled by 256 before the
                    cast, as the kernel does): the control for (d), and a stand-in for (c)
                    when the 8-bit kernel is not in the bundle
    kv_only    (f)  e4m3 weights  + attention on e4m3 K/V only (Q and P exact): the drift the
                    8-bit KV cache alone causes, so (e) - (f) is what quantising Q and P adds;
                    gated for information only (the exit status ignores it)
    candidate_q8 (g) e4m3 weights + wideattn 8-bit attention with Q quantised per tensor here
                    and passed as e4m3 (the kernel for Q already in e4m3: wgmma_e4m3q_d512 on
                    sm_90, fp16 P; mma_e4m3q_d512 elsewhere); gated for information only
    k_smooth   (h)  as (e) with K smoothed before quantising: the per-head, per-channel mean of K
                    over the batch's tokens subtracted (softmax is unchanged by it: q.mu is the
                    same for every key of a query); gated for information only
    per_token_kv (i) as (e) with one K and one V scale per token and head (amax / 448) instead of
                    one per tensor; gated for information only
    (h) and (i) measure two of the published ways to keep 8-bit attention error low, on this model,
    before any kernel is built for them.

"e4m3 weights" = every linear layer of every decoder block (q, kv, o, gate, up, down) rounded
to e4m3 with one scale per output channel (amax / 448) and dequantised back to BF16; the
embedding, the LM head and all norms stay BF16 (the usual FP8 checkpoint recipe, which leaves
lm_head out). Before the variants, the reference model also runs with an fp64 PyTorch
attention ("torch-reference") and the KL between the two must be tiny: that validates the
ctypes wiring (strides, block table, GQA mapping).

Each variant's logits go to an HDF5 dump in the schema of docs/accuracy.md section 1 (float32,
chunked by rows, `tokens` = next-token ids, attributes model/variant/engine) under --dump-dir.
Then `wideattn accuracy gate REF CAND --baseline BASE --rule paired --json ...` runs with (a) as
reference and (b) as baseline for every gated variant; the JSON reports land in --out. The paired
rule (docs/accuracy.md section 3): d_t = KL_t(a||x) - KL_t(a||b) per token, ACCEPT iff the
one-sided upper bound of mean d (batch means over blocks of consecutive tokens, Student t,
--confidence) is within the margin --margin + --margin-rel x mean KL(a||b), REJECT iff the lower
bound exceeds it, else INCONCLUSIVE. A numpy computation of the same per-token KL and a
pure-Python mirror of the rule (paired_gate) cross-check the CLI, and decide when the CLI cannot
run (the summary says which path produced each verdict). The summary table is printed last.

--e4m3-kernel NAME pins one 8-bit prefill kernel (wideattn_set_prefill_kernel, set around that
variant's calls only) for the 8-bit variant of its dtypes: a bf16-Q kernel runs (c), an e4m3-Q
kernel (g), and that variant then plays the candidate's part in the exit status below (the other
keeps the dispatcher's choice and is gated for information). A kernel whose manifest features
include "v_transposed" (wgmma_e4m3pv_d512, wgmma_e4m3pvkv_d512, wgmma_e4m3alt_d512,
wgmma_e4m3altkv_d512, wgmma_e4m3alt64_d512) reads V only in the transposed layout of WIDEATTN_FLAG_V_TRANSPOSED
(include/wideattn.h, kernels/common/v_transposed.h): its V cache is the same e4m3 codes moved to
[block][kv_head][d][v_slot_position(slot)], and the flag is set. The bundle without a prefill
kernel NAME: exit 3 before the variants run; NAME's dtypes serving neither variant (not an e4m3
K/V cache with bf16 O): exit 2. e2e_summary.json records the pin ("e4m3_kernel": name, variant,
v_layout, features; "gated_candidate") and each 8-bit variant its "kernel", "kernel_pinned" and
"v_layout" ("engine" or "transposed").

Exit status: 0 = candidate ACCEPTed and broken REJECTed; 1 = candidate rejected or broken
accepted; 2 = error (a variant other than the candidate failed, the wiring check failed, the
CLI and numpy disagree, or the 8-bit kernel failed at launch); 3 = the 8-bit kernel is not in
the bundle (WIDEATTN_ERROR_UNSUPPORTED), everything else ran and broken was rejected; 4 = the
gate was INCONCLUSIVE for the candidate or broken (too few tokens to decide at the margin).

Everything above the "GPU part" marker imports only the standard library (numpy is imported
inside functions), so `python3 tools/bench/e2e_drift.py --self-test` runs on machines without torch.
"""

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))  # tools/bench/, beside peers/
ROOT_DIR = os.path.dirname(os.path.dirname(BENCH_DIR))
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)

from peers import wideattn_ctypes  # noqa: E402  (standard library only)

# Gemma 4 global-layer attention (docs/design.md section 1).
HEAD_DIM = 512
GROUP = 8                            # query heads per KV head
SOFTMAX_SCALE = 1.0
ROPE_FRACTION = 0.25                 # partial RoPE: the first 25% of the head dims rotate
ROPE_THETA = 1.0e6
FINAL_SOFTCAP = 30.0
RMS_EPS = 1e-6
BLOCK_SIZE = 16                      # KV cache page size handed to wideattn

# Default model size (small enough for seconds on an H200, wide enough to be faithful).
DEFAULT_VOCAB = 32768
DEFAULT_HIDDEN = 2048
DEFAULT_LAYERS = 4
DEFAULT_KV_HEADS = 2                 # x GROUP = 16 query heads
DEFAULT_MLP_RATIO = 4
DEFAULT_SEQ_LENS = "1024,768,256"    # varlen batch, 2048 tokens in all
DEFAULT_SEED = 0
DEFAULT_GLOBAL_EVERY = 1             # every layer global (the hardest case); 6 = Gemma 4's 5 local : 1
SLIDING_WINDOW = 1024                # local layers' window (Gemma 4), fp64 attention in all variants

# Weight scaling (see build_model). Scores q.k have standard deviation ATTN_SCORE_STD_FIRST in
# layer 0 rising linearly to ATTN_SCORE_STD_LAST in the last layer: broad to sharp attention.
ATTN_SCORE_STD_FIRST = 1.0
ATTN_SCORE_STD_LAST = 3.0
# LM head rows: logit_i = LOGIT_STD * s_i * (u_i . h) with u_i ~ N(0, I / hidden) and per-row
# scales s_i = exp(LM_ROW_LOG_STD * n_i) (RMS 1). The spread of s_i gives a few tokens far above
# the bulk, as in a trained model; a pure Gaussian head saturates at a top-1 probability of
# about 0.2 under the softcap. Pure-Python simulation at V = 32768 (isotropic h): std 5.0 -> mean
# top-1 probability 0.53, entropy 1.7 nats; 6.0 -> 0.37, 2.2 nats.
DEFAULT_LOGIT_STD = 5.5
DEFAULT_LM_ROW_LOG_STD = 0.5

# e4m3 (float8_e4m3fn): largest finite value; torch's cast does not saturate, so clamp first.
E4M3_MAX = 448.0
P_SCALE_KERNEL = 256.0               # the 8-bit kernel stores P * 2^8 (fp8/mma_e4m3_d512/NOTES.md)
P_SCALE_BROKEN = 1.0 / 256.0         # the broken variant: the P scale inverted

# Models: this script's decoder, or transformers' Gemma 4 code (tools/bench/hf_gemma4.py).
MODEL_OWN = "gemma4-style"
MODEL_TRANSFORMERS = "transformers-gemma4"
MODEL_CHOICES = (MODEL_OWN, MODEL_TRANSFORMERS)

# Checks and outputs.
WIRING_KL_MAX = 1e-3                 # mean KL(torch fp64 attention || wideattn bf16) allowed
CLI_NUMPY_REL_TOL = 1e-6             # CLI vs numpy mean KL agreement (relative)
CLI_NUMPY_ABS_TOL = 1e-12
KL_BLOCK_ROWS = 64                   # rows per numpy block (64 x 32768 float64 = 16 MiB)
CHUNK_TARGET_BYTES = 256 * 1024      # HDF5 chunk size the accuracy writer aims for
DEFAULT_SAMPLE_ROWS = 24             # float16 rows per sample dump (24 x 32768 x 2 B = 1.5 MiB)
SAMPLE_MAX_BYTES = 2 * 1024 * 1024   # a sample dump larger than this is not kept
CLI_TIMEOUT_S = 300
CLI_VERDICT_STATUS = {"ACCEPT": 0, "REJECT": 1, "INCONCLUSIVE": 3}   # `accuracy gate` exit codes
# Fields of the CLI's paired gate report kept in the summary (docs/accuracy.md section 5).
CLI_GATE_FIELDS = ("rule", "verdict", "margin", "mean_difference", "stderr_difference",
                   "naive_stderr_difference", "upper_bound", "lower_bound", "t_quantile",
                   "block_tokens", "blocks", "block_rule", "lag1_autocorrelation",
                   "tokens_needed", "tokens_needed_verdict")

# The gate's paired rule (docs/accuracy.md section 3; accuracy/gate.h, accuracy/batch_means.h).
GATE_CONFIDENCE = 0.95               # one-sided
GATE_MIN_BLOCKS = 10                 # the default block length leaves at least this many blocks
GATE_BLOCK_BIAS_TARGET = 0.05        # AR(1) variance bias the default block length accepts
GATE_ROWS_NAMED = 5
GATE_VERDICTS = ("ACCEPT", "REJECT", "INCONCLUSIVE")
T_ASYMPTOTIC_FROM = 10000            # degrees of freedom from which the 1/df expansion is used
T_BISECTIONS = 200

# Variant names, in the order they run; dump file names; gate roles.
V_REFERENCE = "reference"
V_BASELINE = "baseline"
V_CANDIDATE = "candidate"
V_BROKEN = "broken"
V_EMULATED = "emulated"
V_KV_ONLY = "kv_only"
V_CANDIDATE_Q8 = "candidate_q8"
V_K_SMOOTH = "k_smooth"
V_PER_TOKEN_KV = "per_token_kv"
VARIANT_ORDER = (V_REFERENCE, V_BASELINE, V_BROKEN, V_EMULATED, V_KV_ONLY, V_CANDIDATE, V_CANDIDATE_Q8,
                 V_K_SMOOTH, V_PER_TOKEN_KV)
GATED = (V_CANDIDATE, V_BROKEN, V_EMULATED, V_KV_ONLY, V_CANDIDATE_Q8, V_K_SMOOTH, V_PER_TOKEN_KV)
WIDEATTN_8BIT = (V_CANDIDATE, V_CANDIDATE_Q8)   # absent from the bundle: unavailable, not failed
DUMP_NAMES = {V_REFERENCE: "e2e_reference.h5", V_BASELINE: "e2e_baseline.h5",
              V_CANDIDATE: "e2e_candidate.h5", V_BROKEN: "e2e_broken.h5",
              V_EMULATED: "e2e_emulated.h5", V_KV_ONLY: "e2e_kv_only.h5",
              V_CANDIDATE_Q8: "e2e_candidate_q8.h5", V_K_SMOOTH: "e2e_k_smooth.h5",
              V_PER_TOKEN_KV: "e2e_per_token_kv.h5"}
VARIANT_LETTERS = {V_REFERENCE: "a", V_BASELINE: "b", V_CANDIDATE: "c", V_BROKEN: "d",
                   V_EMULATED: "e", V_KV_ONLY: "f", V_CANDIDATE_Q8: "g", V_K_SMOOTH: "h",
                   V_PER_TOKEN_KV: "i"}

# Attention backends.
ATTN_WIDEATTN_BF16 = "wideattn-bf16"
ATTN_TORCH_REFERENCE = "torch-reference"
ATTN_WIDEATTN_E4M3 = "wideattn-e4m3"
ATTN_WIDEATTN_E4M3Q = "wideattn-e4m3q"
ATTN_BROKEN_EMULATED = "broken-e4m3-emulated"
ATTN_E4M3_EMULATED = "e4m3-emulated"
ATTN_KV_ONLY_EMULATED = "e4m3-kv-only-emulated"
ATTN_K_SMOOTH_EMULATED = "e4m3-k-smoothed-emulated"
ATTN_PER_TOKEN_KV_EMULATED = "e4m3-per-token-kv-emulated"
BF16_ATTN_CHOICES = (ATTN_WIDEATTN_BF16, ATTN_TORCH_REFERENCE)

# Variant status.
ST_OK = "ok"
ST_UNAVAILABLE = "unavailable"       # the 8-bit kernel is not in the bundle / no library
ST_FAILED = "failed"
ST_SKIPPED = "skipped"

EXIT_PASS = 0
EXIT_GATE_FAIL = 1
EXIT_ERROR = 2
EXIT_NO_CANDIDATE = 3
EXIT_INCONCLUSIVE = 4

# --e4m3-kernel: one prefill kernel pinned by name (wideattn_set_prefill_kernel) for the 8-bit
# variant whose dtypes it takes: bf16 Q -> (c) candidate, e4m3 Q -> (g) candidate_q8 (K/V e4m3 and
# O bf16 in both). The exit status then follows that variant.
E4M3_KERNEL_VARIANTS = {wideattn_ctypes.DTYPE_BF16: V_CANDIDATE,      # the kernel's Q dtype -> variant
                        wideattn_ctypes.DTYPE_E4M3: V_CANDIDATE_Q8}
KERNEL_KIND_PREFILL = "prefill"
KERNEL_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
FEATURE_V_TRANSPOSED = "v_transposed"   # kFeatureVTransposed, kernels/common/v_transposed.h
V_LAYOUT_ENGINE = "engine"              # v_cache[block][slot][kv_head][d]
V_LAYOUT_TRANSPOSED = "transposed"      # v_cache[block][kv_head][d][v_slot_position(slot)]

# The transposed V layout's slot interleave (kernels/common/v_transposed.h).
V_GROUP_SLOTS = 16                      # kVGroupSlots: slots interleaved together
V_PAIR_SLOTS = 2                        # kVPairSlots: consecutive slots kept together
V_QUAD_SLOTS = 8                        # kVQuadSlots: slots of one 8-column score quad
V_LANE_BYTES = V_GROUP_SLOTS // (V_QUAD_SLOTS // V_PAIR_SLOTS)   # kVLaneBytes
V_TRANSPOSED_SLOT_STRIDE = 1            # v_slot_stride the library requires with the flag


# ----------------------------------------------------------------------------- configuration


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the decoder and of the token batch."""

    vocab: int = DEFAULT_VOCAB
    hidden: int = DEFAULT_HIDDEN
    layers: int = DEFAULT_LAYERS
    kv_heads: int = DEFAULT_KV_HEADS
    mlp_ratio: int = DEFAULT_MLP_RATIO
    seq_lens: tuple = tuple(int(n) for n in DEFAULT_SEQ_LENS.split(","))
    seed: int = DEFAULT_SEED
    logit_std: float = DEFAULT_LOGIT_STD
    lm_row_log_std: float = DEFAULT_LM_ROW_LOG_STD
    global_every: int = DEFAULT_GLOBAL_EVERY

    def is_global(self, layer):
        """Gemma 4 numbering: with global_every 6, layers 5, 11, ... are global."""
        return (layer + 1) % self.global_every == 0

    @property
    def q_heads(self):
        return self.kv_heads * GROUP

    @property
    def intermediate(self):
        return self.hidden * self.mlp_ratio

    @property
    def rope_dims(self):
        return int(HEAD_DIM * ROPE_FRACTION)

    @property
    def total_tokens(self):
        return sum(self.seq_lens)

    def score_std(self, layer):
        """Standard deviation of q.k in `layer` (linear from first to last)."""
        if self.layers == 1:
            return ATTN_SCORE_STD_FIRST
        t = layer / (self.layers - 1)
        return ATTN_SCORE_STD_FIRST + t * (ATTN_SCORE_STD_LAST - ATTN_SCORE_STD_FIRST)

    def qk_norm_gain(self, layer):
        """q_norm = k_norm weight giving score_std: unit-RMS q, k -> q.k std gain^2 sqrt(D)."""
        return math.sqrt(self.score_std(layer) / math.sqrt(HEAD_DIM))

    def label(self):
        ratio = "" if self.global_every == 1 else f" global every {self.global_every}"
        return (f"e2e-gemma4-global-tiny L{self.layers}{ratio} H{self.hidden} Hq{self.q_heads}/"
                f"Hkv{self.kv_heads} D{HEAD_DIM} V{self.vocab} seed {self.seed}")

    def as_dict(self):
        d = dataclasses.asdict(self)
        d.update(q_heads=self.q_heads, head_dim=HEAD_DIM, group=GROUP,
                 intermediate=self.intermediate, rope_dims=self.rope_dims,
                 rope_theta=ROPE_THETA, softmax_scale=SOFTMAX_SCALE, final_softcap=FINAL_SOFTCAP,
                 score_std_per_layer=[self.score_std(i) for i in range(self.layers)],
                 global_layers=[i for i in range(self.layers) if self.is_global(i)],
                 sliding_window=SLIDING_WINDOW,
                 seq_lens=list(self.seq_lens))
        return d


def parse_seq_lens(text):
    """"1024,768,256" -> (1024, 768, 256); every length >= 1."""
    try:
        lens = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--seq-lens '{text}' is not a comma-separated list of integers")
    if not lens or min(lens) < 1:
        raise ValueError(f"--seq-lens '{text}' needs at least one length, each >= 1")
    return lens


@dataclasses.dataclass
class BatchPlan:
    """Host-side layout of the varlen batch and of its paged KV cache (identity per sequence).

    Sequence s's keys fill physical blocks start_block[s] .. start_block[s] + n_s - 1 (n_s =
    ceil(L_s / BLOCK_SIZE)), so its block table row is start_block[s] + i: each sequence starts
    on a block boundary and the cache is contiguous. Unused table entries are 0.
    """

    cu_seqlens: list
    positions: list        # position of each packed token inside its sequence
    slots: list            # cache slot (block * BLOCK_SIZE + offset) of each packed token
    block_table: list      # [num_seqs][max_blocks]
    num_blocks: int


def plan_batch(seq_lens, block_size=BLOCK_SIZE):
    cu = [0]
    positions, slots, table = [], [], []
    start = 0
    blocks = [-(-n // block_size) for n in seq_lens]
    width = max(blocks)
    for n, count in zip(seq_lens, blocks):
        cu.append(cu[-1] + n)
        positions.extend(range(n))
        slots.extend(start * block_size + i for i in range(n))
        table.append([start + i for i in range(count)] + [0] * (width - count))
        start += count
    return BatchPlan(cu, positions, slots, table, start)


def make_tokens(seq_lens, vocab, seed):
    """Random inputs and next-token ids: each sequence draws L+1 ids, feeds the first L."""
    rng = random.Random(seed)
    inputs, targets = [], []
    for n in seq_lens:
        ids = [rng.randrange(vocab) for _ in range(n + 1)]
        inputs.extend(ids[:-1])
        targets.extend(ids[1:])
    return inputs, targets


def rows_per_chunk(vocab, bytes_per_value):
    """Rows per HDF5 chunk: about CHUNK_TARGET_BYTES, at least one row (docs/accuracy.md 1)."""
    return max(1, CHUNK_TARGET_BYTES // (vocab * bytes_per_value))


def v_slot_position(slot):
    """Byte position of `slot` in its transposed V page row: v_slot_position of
    kernels/common/v_transposed.h, position(s) = 16 (s / 16) + 4 ((s / 2) % 4) + 2 ((s / 8) % 2)
    + s % 2 (include/wideattn.h, WIDEATTN_FLAG_V_TRANSPOSED)."""
    group, in_group = divmod(slot, V_GROUP_SLOTS)
    quad, lane_pair = in_group // V_QUAD_SLOTS, (in_group % V_QUAD_SLOTS) // V_PAIR_SLOTS
    return group * V_GROUP_SLOTS + lane_pair * V_LANE_BYTES + quad * V_PAIR_SLOTS + in_group % V_PAIR_SLOTS


def v_transposed_strides(kv_heads, head_dim, block_size):
    """(v_block_stride, v_slot_stride, v_head_stride) in elements of a dense transposed V cache
    [block][kv_head][d][position] (tools/harness/problem.cpp use_transposed_v)."""
    head_stride = head_dim * block_size
    return head_stride * kv_heads, V_TRANSPOSED_SLOT_STRIDE, head_stride


def v_transposed_offset(block, slot, head, dim, kv_heads, head_dim, block_size):
    """Element offset of V(block, slot, head, d) in that cache (v_transposed_offset of
    kernels/common/v_transposed.h)."""
    block_stride, _, head_stride = v_transposed_strides(kv_heads, head_dim, block_size)
    return block * block_stride + head * head_stride + dim * block_size + v_slot_position(slot)


class KernelPinError(ValueError):
    """--e4m3-kernel cannot be honoured; `status` is the exit status (module docstring)."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def resolve_e4m3_kernel(kernels, name):
    """The pin of --e4m3-kernel NAME from the bundle's kernel list (Library.kernels() dicts):
    {"name", "variant", "v_layout", "features"}. Raises KernelPinError: EXIT_NO_CANDIDATE when the
    bundle has no prefill kernel NAME, EXIT_ERROR when its dtypes serve neither 8-bit variant."""
    entries = [k for k in kernels if k.get("name") == name and k.get("kind") == KERNEL_KIND_PREFILL]
    if not entries:
        prefill = sorted({k.get("name") for k in kernels if k.get("kind") == KERNEL_KIND_PREFILL})
        raise KernelPinError(f"--e4m3-kernel {name}: the bundle has no prefill kernel of that name "
                             f"(its prefill kernels: {', '.join(prefill) or 'none'})", EXIT_NO_CANDIDATE)
    kernel = entries[0]
    variant = E4M3_KERNEL_VARIANTS.get(kernel["q_dtype"])
    if (variant is None or kernel["kv_dtype"] != wideattn_ctypes.DTYPE_E4M3
            or kernel["o_dtype"] != wideattn_ctypes.DTYPE_BF16):
        raise KernelPinError(f"--e4m3-kernel {name}: its dtypes (q {kernel['q_dtype']}, kv "
                             f"{kernel['kv_dtype']}, o {kernel['o_dtype']}) serve neither 8-bit variant: "
                             f"(c) takes bf16 Q, (g) e4m3 Q, both an e4m3 K/V cache and bf16 O "
                             f"(wideattn_dtype bf16 {wideattn_ctypes.DTYPE_BF16}, e4m3 "
                             f"{wideattn_ctypes.DTYPE_E4M3})", EXIT_ERROR)
    features = sorted({f.strip() for k in entries for f in (k.get("features") or "").split(",") if f.strip()})
    layout = V_LAYOUT_TRANSPOSED if FEATURE_V_TRANSPOSED in features else V_LAYOUT_ENGINE
    return {"name": name, "variant": variant, "v_layout": layout, "features": features}


# ----------------------------------------------------------------------------- statistics


def kl_row_python(ref, cand):
    """KL(softmax(ref) || softmax(cand)) of one row, pure Python (the self-test's reference)."""
    rmax, cmax = max(ref), max(cand)
    s_ref = math.fsum(math.exp(x - rmax) for x in ref)
    s_cand = math.fsum(math.exp(x - cmax) for x in cand)
    log_s_ref, log_s_cand = math.log(s_ref), math.log(s_cand)
    return math.fsum(math.exp(r - rmax) / s_ref * ((r - rmax - log_s_ref) - (c - cmax - log_s_cand))
                     for r, c in zip(ref, cand))


def kl_rows(ref, cand):
    """Per-row KL(softmax(ref) || softmax(cand)) in float64 for 2-D numpy arrays of finite logits.

    With a = ref - max(ref), b = cand - max(cand): KL = sum(e^a (a - b)) / sum(e^a)
    - log sum(e^a) + log sum(e^b) (docs/accuracy.md section 4).
    """
    import numpy as np
    a = ref.astype(np.float64)
    b = cand.astype(np.float64)
    a -= a.max(axis=1, keepdims=True)
    b -= b.max(axis=1, keepdims=True)
    ea = np.exp(a)
    s_ref = ea.sum(axis=1)
    s_cand = np.exp(b).sum(axis=1)
    return (ea * (a - b)).sum(axis=1) / s_ref - np.log(s_ref) + np.log(s_cand)


def summarize_kl(kl, top1_same):
    """Mean, stderr, max, median, p99 of per-token KL and the top-1 agreement (numpy arrays)."""
    import numpy as np
    n = kl.size
    stderr = float(kl.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    agree = float(top1_same.mean())
    return {"count": int(n), "mean": float(kl.mean()), "stderr": stderr, "max": float(kl.max()),
            "median": float(np.median(kl)), "p99": float(np.percentile(kl, 99)),
            "top1_agreement_percent": 100.0 * agree}


def kl_per_token(ref, cand, block_rows=KL_BLOCK_ROWS):
    """Per-token KL (float64) and top-1 agreement flags of two [tokens, vocab] arrays (or h5py
    datasets), by row blocks."""
    import numpy as np
    kls, same = [], []
    rows = ref.shape[0]
    for start in range(0, rows, block_rows):
        end = min(start + block_rows, rows)
        r = np.asarray(ref[start:end])
        c = np.asarray(cand[start:end])
        kls.append(kl_rows(r, c))
        same.append(r.argmax(axis=1) == c.argmax(axis=1))
    return np.concatenate(kls), np.concatenate(same)


def kl_arrays(ref, cand, block_rows=KL_BLOCK_ROWS):
    """KL statistics of two in-memory [tokens, vocab] arrays (or h5py datasets), by row blocks."""
    return summarize_kl(*kl_per_token(ref, cand, block_rows))


def kl_files(ref_path, cand_path, block_rows=KL_BLOCK_ROWS, per_token=False):
    """KL statistics between two logit dumps, read back with h5py (cross-checks the CLI); with
    per_token, (statistics, per-token KL array)."""
    import h5py
    with h5py.File(ref_path, "r") as fr, h5py.File(cand_path, "r") as fc:
        ref, cand = fr["logits"], fc["logits"]
        if ref.shape != cand.shape:
            raise ValueError(f"{ref_path} {ref.shape} and {cand_path} {cand.shape} differ in shape")
        kl, same = kl_per_token(ref, cand, block_rows)
    stats = summarize_kl(kl, same)
    return (stats, kl) if per_token else stats


def distribution_stats(logits, block_rows=KL_BLOCK_ROWS):
    """Mean top-1 probability, entropy (nats) and share of rows with top-1 > 0.5."""
    import numpy as np
    top, ent = [], []
    rows = logits.shape[0]
    for start in range(0, rows, block_rows):
        z = np.asarray(logits[start:min(start + block_rows, rows)], dtype=np.float64)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        p = e / s
        top.append(p.max(axis=1))
        ent.append(-(p * (z - np.log(s))).sum(axis=1))
    top, ent = np.concatenate(top), np.concatenate(ent)
    return {"mean_top1_prob": float(top.mean()), "median_top1_prob": float(np.median(top)),
            "share_top1_above_half": float((top > 0.5).mean()),
            "mean_entropy_nats": float(ent.mean()), "median_entropy_nats": float(np.median(ent))}


# ---- the gate's paired rule (docs/accuracy.md section 3), mirrored from accuracy/gate.cpp and
# accuracy/batch_means.cpp with a different t quantile (the closed-form sums below)


def t_upper_tail(t, df):
    """P(T > t), t >= 0, integer df >= 1: Abramowitz & Stegun 26.7.3 (odd df) / 26.7.4 (even)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2:
        term = total = math.cos(theta)
        for j in range(1, (df - 3) // 2 + 1):
            term *= cos2 * (2 * j) / (2 * j + 1)
            total += term
        inside = 2 / math.pi * (theta + (sin * total if df > 1 else 0.0))
    else:
        term = total = 1.0
        for j in range(1, (df - 2) // 2 + 1):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        inside = sin * total
    return 0.5 * (1.0 - inside)


def t_quantile_expansion(probability, df):
    """The t quantile's expansion in 1/df around the normal quantile z (A&S 26.7.5), O(df^-5)."""
    z = statistics.NormalDist().inv_cdf(probability)
    z2 = z * z
    g = [(z2 + 1) * z / 4, ((5 * z2 + 16) * z2 + 3) * z / 96,
         (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
         ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160]
    return z + sum(gk / df ** (k + 1) for k, gk in enumerate(g))


def t_quantile(probability, df):
    """The t with P(T <= t) = probability in [0.5, 1), integer df >= 1; from T_ASYMPTOTIC_FROM
    degrees of freedom on, t_quantile_expansion."""
    alpha = 1.0 - probability
    if alpha == 0.5:
        return 0.0
    if df >= T_ASYMPTOTIC_FROM:
        return t_quantile_expansion(probability, df)
    lo, hi = 0.0, 1.0
    while t_upper_tail(hi, df) > alpha:
        lo, hi = hi, 2.0 * hi
    for _ in range(T_BISECTIONS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_upper_tail(mid, df) > alpha else (lo, mid)
    return 0.5 * (lo + hi)


def cube_root_ceiling(n):
    b = max(1, round(n ** (1.0 / 3.0)))
    while b ** 3 < n:
        b += 1
    while b > 1 and (b - 1) ** 3 >= n:
        b -= 1
    return b


def default_block_length(n, lag1):
    """(tokens per block, rule): max(ceil(n^(1/3)), ceil(2 r / (target (1 - r^2)))) for
    r = max(lag1, 0), at most max(1, n // GATE_MIN_BLOCKS)."""
    r = max(0.0, lag1) if math.isfinite(lag1) else 0.0
    cube = cube_root_ceiling(max(n, 1))
    auto = n if r >= 1.0 else min(n, math.ceil(2 * r / (GATE_BLOCK_BIAS_TARGET * (1 - r * r))))
    wanted = max(cube, auto)
    cap = max(1, n // GATE_MIN_BLOCKS)
    if wanted > cap:
        return cap, "capped"
    return wanted, "lag1_autocorrelation" if auto > cube else "cube_root"


def batch_means(values, block_tokens=0):
    """Mean of all values; standard error sqrt(b var(block means) / n) over floor(n / b) blocks."""
    n = len(values)
    mean = math.fsum(values) / n
    dev = [v - mean for v in values]
    squares = math.fsum(x * x for x in dev)
    lag1 = math.fsum(a * b for a, b in zip(dev, dev[1:])) / squares if squares > 0 else 0.0
    b, rule = (block_tokens, "stated") if block_tokens else default_block_length(n, lag1)
    k = n // b
    out = {"count": n, "mean": mean, "lag1_autocorrelation": lag1, "block_tokens": b,
           "block_rule": rule, "blocks": k, "long_run_variance": math.nan, "stderr": math.nan,
           "naive_stderr": math.sqrt(squares / (n - 1) / n) if n > 1 else math.nan}
    if k >= 2:
        means = [math.fsum(values[j * b:(j + 1) * b]) / b for j in range(k)]
        grand = math.fsum(means) / k
        out["long_run_variance"] = b * math.fsum((m - grand) ** 2 for m in means) / (k - 1)
        out["stderr"] = math.sqrt(out["long_run_variance"] / n)
    return out


def tokens_to_decide(gap, long_run_variance, confidence, block_tokens, n):
    """Fewest tokens N >= n with t(confidence, N // b - 1) sqrt(V / N) < gap; 0 if none."""
    if not (gap > 0 and math.isfinite(gap) and math.isfinite(long_run_variance)):
        return 0

    def clears(tokens):
        k = tokens // block_tokens
        return k >= 2 and t_quantile(confidence, k - 1) * math.sqrt(long_run_variance / tokens) < gap
    lo = max(n, 1)
    if clears(lo):
        return lo
    hi = 2 * lo
    while not clears(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if clears(mid) else (mid, hi)
    return hi


def nonfinite_rows(values):
    return [i for i, v in enumerate(values) if not math.isfinite(v)]


def paired_gate(cand_kl, base_kl, margin=0.0, margin_rel=0.0, confidence=GATE_CONFIDENCE,
                block_tokens=0):
    """The paired rule on per-token KLs (same tokens, row order): a dict with the verdict
    ACCEPT / REJECT / INCONCLUSIVE, the bounds and the tokens needed; ValueError for a baseline
    whose KL is not finite somewhere (the CLI exits 2 there)."""
    bad = nonfinite_rows(base_kl)
    if bad:
        raise ValueError(f"baseline KL is not finite at rows {bad[:GATE_ROWS_NAMED]} ({len(bad)} rows)")
    base_mean = math.fsum(base_kl) / len(base_kl)
    out = {"rule": "paired", "confidence": confidence, "baseline_mean_kl": base_mean,
           "margin": margin + margin_rel * base_mean}
    bad = nonfinite_rows(cand_kl)
    if bad:
        out.update(verdict="REJECT", candidate_infinite_rows=bad[:GATE_ROWS_NAMED], mean_difference=math.inf,
                   lower_bound=math.inf, upper_bound=math.inf, candidate_mean_kl=math.inf)
        return out
    d = batch_means([c - b for c, b in zip(cand_kl, base_kl)], block_tokens)
    out.update(candidate_mean_kl=math.fsum(cand_kl) / len(cand_kl), mean_difference=d["mean"],
               stderr_difference=d["stderr"], naive_stderr_difference=d["naive_stderr"],
               block_tokens=d["block_tokens"], blocks=d["blocks"], block_rule=d["block_rule"],
               lag1_autocorrelation=d["lag1_autocorrelation"])
    if d["blocks"] < 2:
        out.update(verdict="INCONCLUSIVE", lower_bound=-math.inf, upper_bound=math.inf)
        return out
    t = t_quantile(confidence, d["blocks"] - 1)
    upper, lower = d["mean"] + t * d["stderr"], d["mean"] - t * d["stderr"]
    out.update(t_quantile=t, upper_bound=upper, lower_bound=lower,
               degrees_of_freedom=d["blocks"] - 1)
    if upper <= out["margin"]:
        out["verdict"] = "ACCEPT"
    elif lower > out["margin"]:
        out["verdict"] = "REJECT"
    else:
        out["verdict"] = "INCONCLUSIVE"
        needed = tokens_to_decide(abs(out["margin"] - d["mean"]), d["long_run_variance"],
                                  confidence, d["block_tokens"], d["count"])
        if needed:
            out.update(tokens_needed=needed,
                       tokens_needed_verdict="ACCEPT" if d["mean"] < out["margin"] else "REJECT")
    return out


def means_agree(a, b):
    if a == b:  # also equal infinities
        return True
    return abs(a - b) <= CLI_NUMPY_ABS_TOL + CLI_NUMPY_REL_TOL * max(abs(a), abs(b))


def decide_exit(errors, wiring_ok, candidate_status, candidate_verdict, broken_verdict):
    """The exit status (module docstring); a verdict of None means 'not gated'."""
    if errors or not wiring_ok:
        return EXIT_ERROR
    if broken_verdict is None:
        return EXIT_ERROR
    if broken_verdict == "ACCEPT" or (candidate_status == ST_OK and candidate_verdict == "REJECT"):
        return EXIT_GATE_FAIL
    if broken_verdict == "INCONCLUSIVE" or (candidate_status == ST_OK
                                            and candidate_verdict == "INCONCLUSIVE"):
        return EXIT_INCONCLUSIVE
    if candidate_status != ST_OK:
        return EXIT_NO_CANDIDATE
    return EXIT_PASS


def _num(value, spec):
    return "-" if value is None else format(value, spec)


def format_summary(summary):
    """The table printed last: one row per variant, then the checks and the exit status."""
    lines = ["", "== e2e drift summary: " + summary["config"]["label"],
             f"{'variant':<14} {'attention':<26} {'weights':<7} {'status':<11} "
             f"{'mean KL vs (a)':>14} {'stderr':>9} {'top1 %':>7} {'KL vs (b)':>10} "
             f"{'d upper':>10} {'gate':<12} verdict by"]
    for name in VARIANT_ORDER:
        v = summary["variants"].get(name)
        if v is None:
            continue
        drift = v.get("kl_vs_reference") or {}
        vs_base = (v.get("kl_vs_baseline") or {}).get("mean")
        gate = v.get("gate") or {}
        lines.append(
            f"{VARIANT_LETTERS[name] + ' ' + name:<14} {v['attention']:<26} {v['weights']:<7} "
            f"{v['status']:<11} {_num(drift.get('mean'), '14.6e')} {_num(drift.get('stderr'), '9.2e')} "
            f"{_num(drift.get('top1_agreement_percent'), '7.2f')} {_num(vs_base, '10.3e')} "
            f"{_num(gate.get('upper_bound'), '10.3e')} {gate.get('verdict', '-'):<12} "
            f"{gate.get('source', '-')}")
    wiring = summary.get("wiring") or {}
    if wiring.get("kl"):
        lines.append(f"wiring: mean KL(torch fp64 attention || {wiring['backend']}) "
                     f"{wiring['kl']['mean']:.3e} (max {wiring['kl']['max']:.3e}, limit "
                     f"{WIRING_KL_MAX:g}): {'ok' if wiring['ok'] else 'FAILED'}")
    elif wiring.get("note"):
        lines.append(f"wiring: {wiring['note']}")
    dist = summary.get("reference_distribution")
    if dist:
        lines.append(f"reference peakedness: mean top-1 p {dist['mean_top1_prob']:.3f}, "
                     f"mean entropy {dist['mean_entropy_nats']:.2f} nats, "
                     f"top-1 > 0.5 in {100 * dist['share_top1_above_half']:.1f}% of rows")
    pin = summary.get("e4m3_kernel")
    if pin:
        lines.append(f"--e4m3-kernel {pin['name']}: pinned for ({VARIANT_LETTERS[pin['variant']]}) "
                     f"{pin['variant']}, V layout {pin['v_layout']}; the exit status follows that variant")
    kernel_vs_emu = summary.get("candidate_vs_emulated")
    if kernel_vs_emu:
        lines.append(f"8-bit kernel vs its PyTorch emulation: mean KL(e || c) "
                     f"{kernel_vs_emu['mean']:.3e}")
    for note in summary.get("notes", []):
        lines.append("note: " + note)
    for error in summary.get("errors", []):
        lines.append("ERROR: " + error)
    confidence = summary.get("confidence", GATE_CONFIDENCE)
    lines.append(f"gate rule (paired): d_t = KL_t(a||x) - KL_t(a||b); ACCEPT iff the "
                 f"{100 * confidence:g}% upper bound of mean d (batch means) <= margin "
                 f"{summary['margin']:g} + {summary['margin_rel']:g} x mean KL(a||b), REJECT iff the "
                 f"lower bound > margin, else INCONCLUSIVE")
    lines.append(f"exit status {summary['exit_status']}: {summary['exit_meaning']}")
    return "\n".join(lines)


EXIT_MEANINGS = {
    EXIT_PASS: "candidate ACCEPTED and broken REJECTED",
    EXIT_GATE_FAIL: "gate outcome wrong (candidate rejected or broken accepted)",
    EXIT_ERROR: "error (see ERROR lines)",
    EXIT_NO_CANDIDATE: "8-bit kernel not available; broken REJECTED as expected",
    EXIT_INCONCLUSIVE: "gate INCONCLUSIVE for the candidate or broken (too few tokens to decide)",
}


# t(p, df): the values tests/accuracy/test_student_t.cpp checks the C++ quantile (incomplete beta
# fraction) against; they agree with published tables (e.g. 1.812 for 0.95 and 10 degrees of
# freedom) to every printed digit.
T_TABLE = ((0.95, 1, 6.313751514675028), (0.95, 2, 2.919985580353723), (0.95, 5, 2.0150483733330224),
           (0.95, 10, 1.8124611228116754), (0.95, 30, 1.6972608865939578),
           (0.975, 10, 2.228138851986274), (0.99, 3, 4.540702858568121),
           (0.999, 1000, 3.09840216391349))


def self_test_gate(check):
    """The paired rule's mirror: t quantile, block length, batch means, verdicts, tokens needed."""
    for p, df, want in T_TABLE:
        got = t_quantile(p, df)
        check(abs(got - want) <= 1e-9 * want, f"t_quantile({p}, {df}) = {got!r}, table {want}")
    for p in (0.6, 0.9, 0.99):
        check(abs(t_quantile(p, 1) - math.tan(math.pi * (p - 0.5))) < 1e-10, f"Cauchy quantile {p}")
        check(abs(t_quantile(p, 2) - (2 * p - 1) / math.sqrt(2 * p * (1 - p))) < 1e-10, f"t2 {p}")
    z = statistics.NormalDist().inv_cdf(0.95)
    check(abs(t_quantile(0.95, 10 ** 6) - (z + (z ** 3 + z) / 4e6)) < 1e-11, "t quantile, large df")
    for p in (0.9, 0.95, 0.999):
        df = T_ASYMPTOTIC_FROM - 1
        check(abs(t_quantile(p, df) - t_quantile_expansion(p, df)) < 1e-12,
              f"t quantile {p}: the sums and the expansion agree where the expansion takes over")
    check(default_block_length(1001, 0.0) == (11, "cube_root"), "block length: cube root")
    check(default_block_length(10000, 0.5) == (27, "lag1_autocorrelation"), "block length: r 0.5")
    check(default_block_length(1000, 0.9) == (100, "capped"), "block length: capped")
    check(default_block_length(24, 0.0) == (2, "capped"), "block length: 24 tokens")
    rng = random.Random(5)
    series = [0.01 * rng.gauss(0.0, 1.0) for _ in range(310)]
    stats = batch_means(series, 10)
    means = [sum(series[j * 10:(j + 1) * 10]) / 10 for j in range(31)]
    grand = sum(means) / 31
    want = math.sqrt(10 * sum((m - grand) ** 2 for m in means) / 30 / 310)
    check(abs(stats["stderr"] - want) < 1e-12 * want, f"batch-means stderr {stats['stderr']} vs {want}")
    check(abs(batch_means(series, 1)["stderr"] - stats["naive_stderr"]) < 1e-15, "blocks of one: i.i.d.")
    centred = [x - math.fsum(series) / len(series) for x in series]
    se = batch_means(centred, 10)["stderr"]
    base = [0.05 + 0.001 * rng.random() for _ in series]
    verdict = lambda shift, **kw: paired_gate([b + x + shift * se for b, x in zip(base, centred)],
                                              base, block_tokens=10, **kw)
    check(paired_gate(base, base)["verdict"] == "ACCEPT", "identical candidate accepted at margin 0")
    check(verdict(3.0)["verdict"] == "REJECT", "+3 standard errors rejected")
    unsure = verdict(0.5)
    check(unsure["verdict"] == "INCONCLUSIVE" and unsure.get("tokens_needed_verdict") == "REJECT",
          f"+0.5 standard errors inconclusive: {unsure}")
    needed = unsure.get("tokens_needed", 0)
    bound = lambda n: t_quantile(0.95, n // 10 - 1) * math.sqrt(se * se * 310 / n)
    gap = abs(unsure["mean_difference"])
    check(needed > 310 and bound(needed) < gap <= bound(needed - 1), f"tokens needed {needed}")
    check(verdict(-3.0)["verdict"] == "ACCEPT", "-3 standard errors accepted")
    check(verdict(0.5, margin_rel=0.1)["verdict"] == "ACCEPT", "relative margin")
    check(verdict(0.5, confidence=0.5)["verdict"] == "REJECT", "confidence 0.5: the point rule")
    check(paired_gate(base[:1] + [math.inf] + base[2:], base)["verdict"] == "REJECT",
          "infinite candidate KL rejected")
    try:
        paired_gate(base, base[:3] + [math.inf] + base[4:])
        check(False, "infinite baseline KL accepted")
    except ValueError as exc:
        check("rows [3]" in str(exc), f"infinite baseline message: {exc}")


def self_test_batch_and_config(check):
    """Batch plan, tokens, argument parsing and the model configuration."""
    plan = plan_batch((20, 16, 1), block_size=16)
    check(plan.cu_seqlens == [0, 20, 36, 37], f"cu_seqlens {plan.cu_seqlens}")
    check(plan.num_blocks == 4, f"num_blocks {plan.num_blocks}")
    check(plan.block_table == [[0, 1], [2, 0], [3, 0]], f"block_table {plan.block_table}")
    check(plan.slots[19] == 19 and plan.slots[20] == 32 and plan.slots[36] == 48,
          f"slots {plan.slots[19]}, {plan.slots[20]}, {plan.slots[36]}")
    check(plan.positions[20] == 0 and plan.positions[35] == 15, "positions restart per sequence")
    inputs, targets = make_tokens((5, 3), 100, 7)
    check(len(inputs) == 8 and inputs[1:5] == targets[0:4], "targets are the next inputs")
    check(make_tokens((5, 3), 100, 7) == (inputs, targets), "tokens are deterministic")
    check(parse_seq_lens("1024, 768,256") == (1024, 768, 256), "parse_seq_lens")
    for bad in ("", "0", "a,b"):
        try:
            parse_seq_lens(bad)
            check(False, f"parse_seq_lens accepted '{bad}'")
        except ValueError:
            pass
    check(rows_per_chunk(32768, 4) == 2 and rows_per_chunk(262144, 4) == 1, "rows_per_chunk")
    cfg = ModelConfig()
    check(cfg.q_heads == 16 and cfg.rope_dims == 128 and cfg.total_tokens == 2048, "config")
    check(abs(cfg.qk_norm_gain(0) ** 4 * HEAD_DIM - cfg.score_std(0) ** 2) < 1e-9, "qk gain")
    check(abs(cfg.score_std(cfg.layers - 1) - ATTN_SCORE_STD_LAST) < 1e-12, "score std")
    check(all(cfg.is_global(i) for i in range(cfg.layers)), "all layers global by default")
    gemma = ModelConfig(layers=12, global_every=6)
    check([i for i in range(12) if gemma.is_global(i)] == [5, 11], "Gemma 4 global layers")


def self_test_kl_gate_exit(check):
    """The pure-Python KL and the exit status from the gate's verdicts."""
    row = [0.5, -1.0, 2.0, 0.0]
    check(abs(kl_row_python(row, row)) < 1e-15, "KL(p||p) = 0")
    check(abs(kl_row_python(row, [x + 3.0 for x in row])) < 1e-15, "KL is shift invariant")
    p, q = 0.8, 0.5                   # two-point distributions: logits (log p, log(1-p))
    expected = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    got = kl_row_python([math.log(p), math.log(1 - p)], [math.log(q), math.log(1 - q)])
    check(abs(got - expected) < 1e-15, f"two-point KL {got} vs {expected}")

    check(decide_exit([], True, ST_OK, "ACCEPT", "REJECT") == EXIT_PASS, "exit pass")
    check(decide_exit([], True, ST_OK, "REJECT", "REJECT") == EXIT_GATE_FAIL, "exit cand reject")
    check(decide_exit([], True, ST_OK, "ACCEPT", "ACCEPT") == EXIT_GATE_FAIL, "exit broken accept")
    check(decide_exit([], True, ST_OK, "ACCEPT", "INCONCLUSIVE") == EXIT_INCONCLUSIVE, "exit broken ?")
    check(decide_exit([], True, ST_OK, "INCONCLUSIVE", "REJECT") == EXIT_INCONCLUSIVE, "exit cand ?")
    check(decide_exit([], True, ST_UNAVAILABLE, None, "REJECT") == EXIT_NO_CANDIDATE, "exit no cand")
    check(decide_exit(["x"], True, ST_OK, "ACCEPT", "REJECT") == EXIT_ERROR, "exit error")
    check(decide_exit([], False, ST_OK, "ACCEPT", "REJECT") == EXIT_ERROR, "exit wiring")


def self_test_summary(check):
    """format_summary on a made-up summary."""
    fake = {"config": {"label": "test"}, "margin": 0.0, "margin_rel": 0.0,
            "exit_status": 0, "exit_meaning": EXIT_MEANINGS[0], "notes": ["n"], "errors": [],
            "wiring": {"backend": ATTN_WIDEATTN_BF16, "ok": True,
                       "kl": {"mean": 1e-6, "max": 1e-5}},
            "reference_distribution": {"mean_top1_prob": 0.5, "mean_entropy_nats": 1.8,
                                       "share_top1_above_half": 0.5},
            "variants": {V_REFERENCE: {"attention": ATTN_WIDEATTN_BF16, "weights": "bf16",
                                       "status": ST_OK},
                         V_CANDIDATE: {"attention": ATTN_WIDEATTN_E4M3, "weights": "e4m3",
                                       "status": ST_OK,
                                       "kl_vs_reference": {"mean": 0.02, "stderr": 1e-3,
                                                           "top1_agreement_percent": 90.0},
                                       "kl_vs_baseline": {"mean": 1e-3},
                                       "gate": {"verdict": "ACCEPT", "source": "cli"}}}}
    check("c candidate" in format_summary(fake), "format_summary")
    fake["e4m3_kernel"] = {"name": "wgmma_e4m3alt_d512", "variant": V_CANDIDATE_Q8,
                           "v_layout": V_LAYOUT_TRANSPOSED, "features": [FEATURE_V_TRANSPOSED]}
    check("--e4m3-kernel wgmma_e4m3alt_d512: pinned for (g)" in format_summary(fake),
          "format_summary names the pinned kernel")


def self_test_numpy(check):
    """The numpy KL against the pure-Python one, and the distribution statistics (skipped
    without numpy)."""
    try:
        import numpy as np
    except ImportError:
        print("self-test: numpy not installed, numpy KL not checked")
        np = None
    if np is not None:
        rng = np.random.default_rng(1)
        ref = rng.normal(0.0, 4.0, size=(5, 300))
        cand = ref + rng.normal(0.0, 0.3, size=ref.shape)
        fast = kl_rows(ref, cand)
        slow = [kl_row_python(list(r), list(c)) for r, c in zip(ref, cand)]
        check(all(abs(f - s) <= 1e-12 + 1e-9 * abs(s) for f, s in zip(fast, slow)),
              f"numpy KL {fast} vs python {slow}")
        stats = kl_arrays(ref, cand, block_rows=2)
        check(abs(stats["mean"] - math.fsum(slow) / len(slow)) < 1e-12, "kl_arrays blocks")
        dist = distribution_stats(np.array([[0.0, 0.0], [100.0, 0.0]]))
        check(abs(dist["mean_top1_prob"] - 0.75) < 1e-12, f"top-1 {dist}")
        check(abs(dist["mean_entropy_nats"] - math.log(2) / 2) < 1e-12, f"entropy {dist}")


# v_slot_position over one 16-slot group, derived by hand from the formula in include/wideattn.h
# (position(s) = 16 (s / 16) + 4 ((s / 2) % 4) + 2 ((s / 8) % 2) + s % 2): slot -> byte position.
V_SLOT_POSITION_TABLE = (0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)
SELF_TEST_KV_HEADS = 2                  # a small transposed cache: 2 heads, 8 dims, pages of 32
SELF_TEST_HEAD_DIM = 8
SELF_TEST_BLOCK_SIZE = 32


def self_test_transposed_v(check):
    """The transposed V layout: slot permutation, strides and offsets (v_transposed.h)."""
    group = [v_slot_position(s) for s in range(V_GROUP_SLOTS)]
    check(tuple(group) == V_SLOT_POSITION_TABLE, f"v_slot_position of one group: {group}")
    page = [v_slot_position(s) for s in range(SELF_TEST_BLOCK_SIZE)]
    check(sorted(page) == list(range(SELF_TEST_BLOCK_SIZE)), f"a permutation of the page: {page}")
    check(page[V_GROUP_SLOTS:] == [V_GROUP_SLOTS + p for p in V_SLOT_POSITION_TABLE],
          "the second group is the first shifted by 16")
    # The header's inverse: position 4t + 2a + b of a group holds slot 8a + 2t + b.
    inverse = {4 * t + 2 * a + b: 8 * a + 2 * t + b for t in range(4) for a in range(2) for b in range(2)}
    check(all(inverse[v_slot_position(s)] == s for s in range(V_GROUP_SLOTS)), "v_position_slot inverse")
    heads, dim, bs = SELF_TEST_KV_HEADS, SELF_TEST_HEAD_DIM, SELF_TEST_BLOCK_SIZE
    check(v_transposed_strides(heads, dim, bs) == (heads * dim * bs, 1, dim * bs), "transposed strides")
    check(v_transposed_strides(DEFAULT_KV_HEADS, HEAD_DIM, BLOCK_SIZE) == (16384, 1, 8192),
          "transposed strides at the default shape")
    check(v_transposed_offset(1, 8, 1, 3, heads, dim, bs) == 512 + 256 + 3 * 32 + 2,
          "offset of V(block 1, slot 8, head 1, d 3)")
    check(v_transposed_offset(0, 17, 0, 0, heads, dim, bs) == 17 and
          v_transposed_offset(0, 18, 0, 0, heads, dim, bs) == 20, "offsets in the second group")
    blocks = 2
    offsets = sorted(v_transposed_offset(b, s, h, d, heads, dim, bs) for b in range(blocks)
                     for s in range(bs) for h in range(heads) for d in range(dim))
    check(offsets == list(range(blocks * bs * heads * dim)), "the transposed cache is dense, no overlap")


# A bundle's kernel list as Library.kernels() gives it (the fields resolve_e4m3_kernel reads).
def _fake_kernel(name, q, kv, o, features, kind=KERNEL_KIND_PREFILL):
    return {"name": name, "arch": "sm_90a", "q_dtype": q, "kv_dtype": kv, "o_dtype": o,
            "features": features, "kind": kind}


def self_test_e4m3_kernel(check):
    """--e4m3-kernel: argument parsing and the pin's variant and V layout."""
    bf16, e4m3 = wideattn_ctypes.DTYPE_BF16, wideattn_ctypes.DTYPE_E4M3
    kernels = [_fake_kernel("wgmma_bf16_d512", bf16, bf16, bf16, "varlen,paged,causal,lse"),
               _fake_kernel("wgmma_e4m3kv_d512", bf16, e4m3, bf16, "varlen,paged,causal,tma_kv"),
               _fake_kernel("wgmma_e4m3alt_d512", e4m3, e4m3, bf16, "varlen,paged,tma_kv,v_transposed"),
               _fake_kernel("wgmma_e4m3altkv_d512", bf16, e4m3, bf16, "varlen,paged,v_transposed"),
               _fake_kernel("quantize_e4m3", bf16, e4m3, e4m3, "", kind="quantize_e4m3")]
    pin = resolve_e4m3_kernel(kernels, "wgmma_e4m3alt_d512")
    check(pin["variant"] == V_CANDIDATE_Q8 and pin["v_layout"] == V_LAYOUT_TRANSPOSED,
          f"e4m3-Q transposed kernel: {pin}")
    pin = resolve_e4m3_kernel(kernels, "wgmma_e4m3altkv_d512")
    check(pin["variant"] == V_CANDIDATE and pin["v_layout"] == V_LAYOUT_TRANSPOSED,
          f"bf16-Q transposed kernel: {pin}")
    pin = resolve_e4m3_kernel(kernels, "wgmma_e4m3kv_d512")
    check(pin["variant"] == V_CANDIDATE and pin["v_layout"] == V_LAYOUT_ENGINE, f"engine layout: {pin}")
    for name, status in (("wgmma_e4m3pv_d512", EXIT_NO_CANDIDATE), ("quantize_e4m3", EXIT_NO_CANDIDATE),
                         ("wgmma_bf16_d512", EXIT_ERROR)):
        try:
            resolve_e4m3_kernel(kernels, name)
            check(False, f"resolve_e4m3_kernel accepted {name}")
        except KernelPinError as exc:
            check(exc.status == status and name in str(exc), f"{name}: status {exc.status}: {exc}")
    check(parse_args([]).e4m3_kernel is None, "--e4m3-kernel defaults to the dispatcher's choice")
    check(parse_args(["--e4m3-kernel", "wgmma_e4m3alt_d512"]).e4m3_kernel == "wgmma_e4m3alt_d512",
          "--e4m3-kernel NAME accepted")
    check(not parse_args([]).hf_e4m3, "--hf-e4m3 off by default")
    check(parse_args(["--model", MODEL_TRANSFORMERS, "--hf-e4m3"]).hf_e4m3, "--hf-e4m3 with the transformers model")
    for bad in (["--e4m3-kernel", ""], ["--e4m3-kernel", "wgmma e4m3"], ["--e4m3-kernel"],
                ["--e4m3-kernel", "wgmma_e4m3alt_d512", "--model", MODEL_TRANSFORMERS], ["--hf-e4m3"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                parse_args(bad)
            check(False, f"parse_args accepted {bad}")
        except SystemExit as exc:
            check(exc.code == EXIT_ERROR, f"parse_args {bad}: exit {exc.code}")


def self_test():
    """Checks of the pure-Python parts (and of the numpy KL where numpy exists)."""
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)

    for part in (self_test_batch_and_config, self_test_gate, self_test_kl_gate_exit, self_test_summary,
                 self_test_transposed_v, self_test_e4m3_kernel, self_test_numpy):
        part(check)
    if failures:
        print("self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("self-test passed")
    return 0


# ----------------------------------------------------------------------------- GPU part


def _torch():
    import torch
    return torch


def rms_norm(x, weight, eps=RMS_EPS):
    """RMSNorm over the last dim in float32; weight None = no weight (v_norm)."""
    torch = _torch()
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def round_e4m3(x):
    """Round a float tensor to the e4m3 grid (saturating at +-448), returned as float32."""
    torch = _torch()
    return x.float().clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float()


def quantize_per_tensor(x):
    """(e4m3 tensor, float32 device scale [1]) with scale = amax / 448 (1 if x is zero)."""
    torch = _torch()
    amax = x.float().abs().amax()
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).reshape(1)
    q = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale.contiguous()


def round_weight_per_channel(w):
    """e4m3 rounding with one scale per output channel (row), dequantised back to bf16."""
    torch = _torch()
    w32 = w.float()
    amax = w32.abs().amax(dim=1, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return (round_e4m3(w32 / scale) * scale).to(torch.bfloat16)


class Batch:
    """Device tensors of the varlen batch: cu_seqlens, seq_lens_k, block table, slots, RoPE."""

    def __init__(self, cfg):
        torch = _torch()
        plan = plan_batch(cfg.seq_lens)
        dev = "cuda"
        self.cfg = cfg
        self.plan = plan
        self.cu_host = plan.cu_seqlens
        self.num_seqs = len(cfg.seq_lens)
        self.total = cfg.total_tokens
        self.num_blocks = plan.num_blocks
        self.cu_seqlens = torch.tensor(plan.cu_seqlens, dtype=torch.int32, device=dev)
        self.seq_lens_k = torch.tensor(cfg.seq_lens, dtype=torch.int32, device=dev)
        self.block_table = torch.tensor(plan.block_table, dtype=torch.int32, device=dev)
        self.slots = torch.tensor(plan.slots, dtype=torch.int64, device=dev)
        half = cfg.rope_dims // 2
        inv_freq = ROPE_THETA ** (-torch.arange(0, half, dtype=torch.float64, device=dev) / half)
        positions = torch.tensor(plan.positions, dtype=torch.float64, device=dev)
        angles = positions[:, None] * inv_freq[None, :]                 # [T, half]
        self.cos = angles.cos().float()[:, None, :]                     # [T, 1, half]
        self.sin = angles.sin().float()[:, None, :]

    def rope(self, x):
        """NeoX-style rotate-half RoPE on the first rope_dims dims of x [T, H, D] (float32)."""
        torch = _torch()
        rot = self.cfg.rope_dims
        half = rot // 2
        x1, x2 = x[..., :half], x[..., half:rot]
        return torch.cat([x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin,
                          x[..., rot:]], dim=-1)

    def paged(self, x, dtype=None):
        """x [T, Hkv, D] scattered into a [num_blocks, BLOCK_SIZE, Hkv, D] cache (zeros elsewhere)."""
        torch = _torch()
        _, heads, dim = x.shape
        cache = torch.zeros(self.num_blocks * BLOCK_SIZE, heads, dim, dtype=x.dtype, device=x.device)
        cache[self.slots] = x
        cache = cache.view(self.num_blocks, BLOCK_SIZE, heads, dim)
        return cache if dtype is None else cache.to(dtype)

    def transposed_v(self, cache):
        """An e4m3 [num_blocks, BLOCK_SIZE, Hkv, D] cache rearranged into the transposed V layout
        [num_blocks, Hkv, D, BLOCK_SIZE], slot s of each page row at byte v_slot_position(s): the
        same codes moved, none recomputed. Done here rather than by wideattn_quantize_to_cache
        with WIDEATTN_FLAG_V_TRANSPOSED, which would quantise the bf16 V again (x * (1 / scale)
        against this script's x / scale) and could round a few codes differently from the
        engine-layout cache that the other 8-bit kernels read."""
        torch = _torch()
        positions = torch.tensor([v_slot_position(slot) for slot in range(BLOCK_SIZE)],
                                 dtype=torch.int64, device=cache.device)
        codes = cache.view(torch.uint8).permute(0, 2, 3, 1)          # [block, head, d, slot]
        out = torch.empty(codes.shape, dtype=torch.uint8, device=cache.device)
        out[..., positions] = codes
        return out.view(torch.float8_e4m3fn)


# ---- attention backends: callables (layer, q, k, v) -> o, q/o [T, Hq, D] and k/v [T, Hkv, D] bf16


def exact_attention(q, k, v, batch, p_scale=None, window=None):
    """Causal GQA attention in float64 per sequence and KV head; returns float64 [T, Hq, D].

    window: query i sees keys i - window + 1 .. i only (sliding-window layers); None = all.

    p_scale None: exact softmax. Otherwise P = exp(s - rowmax) is multiplied by p_scale, rounded
    to e4m3, divided back, and the row sum l is taken from the unrounded P (as the kernel does).
    """
    torch = _torch()
    q, k, v = q.double(), k.double(), v.double()
    out = torch.empty_like(q)
    kv_heads = k.shape[1]
    for s in range(batch.num_seqs):
        lo, hi = batch.cu_host[s], batch.cu_host[s + 1]
        length = hi - lo
        visible = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        if window is not None:
            visible &= torch.ones_like(visible).triu(1 - window)
        for h in range(kv_heads):
            heads = slice(h * GROUP, (h + 1) * GROUP)
            qh = q[lo:hi, heads, :].permute(1, 0, 2)                       # [G, L, D]
            scores = torch.matmul(qh, k[lo:hi, h, :].t()) * SOFTMAX_SCALE   # [G, L, L]
            scores = scores.masked_fill(~visible, float("-inf"))
            probs = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
            row_sum = probs.sum(dim=-1, keepdim=True)
            if p_scale is not None:
                probs = round_e4m3(probs * p_scale).double() / p_scale
            out[lo:hi, heads, :] = (torch.matmul(probs, v[lo:hi, h, :]) / row_sum).permute(1, 0, 2)
    return out


def round_per_row(x):
    """e4m3 rounding with one scale (amax / 448) per [token, head] row, dequantised, float32."""
    torch = _torch()
    x32 = x.float()
    amax = x32.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return round_e4m3(x32 / scale) * scale


def dequantized_e4m3_inputs(q, k, v, quantize_q=True, smooth_k=False, per_token_kv=False):
    """The 8-bit kernel's view of its inputs: Q rounded per (token, head, dim half) with scale
    amax / 448 (unless not quantize_q: Q as given), K and V rounded per tensor with scale
    amax / 448; all float32. smooth_k: K minus its per-head, per-channel mean over the tokens
    first (attention is unchanged by it); per_token_kv: one K and one V scale per token and head."""
    torch = _torch()
    if smooth_k:
        k = k.float() - k.float().mean(dim=0, keepdim=True)
    if per_token_kv:
        k_deq, v_deq = round_per_row(k), round_per_row(v)
    else:
        k8, k_scale = quantize_per_tensor(k)
        v8, v_scale = quantize_per_tensor(v)
        k_deq, v_deq = k8.float() * k_scale, v8.float() * v_scale
    q_deq = q.float()
    if quantize_q:
        tokens, heads, dim = q.shape
        halves = q_deq.view(tokens, heads, 2, dim // 2)
        amax = halves.abs().amax(dim=-1, keepdim=True)
        q_scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
        q_deq = (round_e4m3(halves / q_scale) * q_scale).view(tokens, heads, dim)
    return q_deq, k_deq, v_deq


class TorchReferenceAttention:
    """fp64 attention on the upcast bf16 inputs, rounded to bf16: validates the wiring (and,
    with a window, serves the sliding-window layers of every variant)."""

    name = ATTN_TORCH_REFERENCE

    def __init__(self, batch, window=None):
        self.batch = batch
        self.window = window

    def __call__(self, layer, q, k, v):
        return exact_attention(q, k, v, self.batch, window=self.window).to(_torch().bfloat16)


class EmulatedE4m3Attention:
    """8-bit attention emulated in PyTorch (float64 math on e4m3-rounded Q, K, V and P).

    p_scale P_SCALE_KERNEL is what the kernel does; P_SCALE_BROKEN is the deliberate defect.
    """

    def __init__(self, batch, p_scale, name, quantize_q=True, smooth_k=False, per_token_kv=False):
        self.batch = batch
        self.p_scale = p_scale
        self.name = name
        self.quantize_q = quantize_q
        self.smooth_k = smooth_k
        self.per_token_kv = per_token_kv

    def __call__(self, layer, q, k, v):
        q_deq, k_deq, v_deq = dequantized_e4m3_inputs(q, k, v, self.quantize_q, self.smooth_k,
                                                      self.per_token_kv)
        return exact_attention(q_deq, k_deq, v_deq, self.batch, self.p_scale).to(_torch().bfloat16)


class WideattnAttention:
    """libwideattn's prefill through ctypes on a paged copy of K/V (bf16 or e4m3 cache)."""

    def __init__(self, lib, batch, kv_e4m3, capability, q_e4m3=False, pin=None):
        self.lib = lib
        self.batch = batch
        self.kv_e4m3 = kv_e4m3
        self.q_e4m3 = q_e4m3          # Q quantised per tensor and passed as e4m3 codes
        self.capability = capability
        self.pin = pin                # resolve_e4m3_kernel's dict, or None: the dispatcher's choice
        self.v_layout = pin["v_layout"] if pin else V_LAYOUT_ENGINE
        self.kernel = None
        self.name = ATTN_WIDEATTN_E4M3Q if q_e4m3 else ATTN_WIDEATTN_E4M3 if kv_e4m3 else ATTN_WIDEATTN_BF16

    def __call__(self, layer, q, k, v):
        torch = _torch()
        batch = self.batch
        scales = None
        if self.kv_e4m3:
            k8, k_scale = quantize_per_tensor(k)
            v8, v_scale = quantize_per_tensor(v)
            k_cache = batch.paged(k8.float(), torch.float8_e4m3fn)     # exact: already on grid
            v_cache = batch.paged(v8.float(), torch.float8_e4m3fn)
            if self.v_layout == V_LAYOUT_TRANSPOSED:
                v_cache = batch.transposed_v(v_cache)
            scales = (k_scale, v_scale)
        else:
            k_cache, v_cache = batch.paged(k), batch.paged(v)
        o = torch.empty_like(q)
        q_scale = None
        if self.q_e4m3:
            q_codes, q_scale = quantize_per_tensor(q)   # contiguous [tokens, heads, dim] e4m3
        else:
            q_codes = q
        p = wideattn_ctypes.PrefillParams()
        p.q, p.q_token_stride, p.q_head_stride = q_codes.data_ptr(), q_codes.stride(0), q_codes.stride(1)
        if q_scale is not None:
            p.q_scale = q_scale.data_ptr()
        p.k_cache = k_cache.data_ptr()
        p.k_block_stride, p.k_slot_stride, p.k_head_stride = k_cache.stride()[:3]
        p.v_cache = v_cache.data_ptr()
        if self.v_layout == V_LAYOUT_TRANSPOSED:
            strides = v_transposed_strides(k.shape[1], HEAD_DIM, BLOCK_SIZE)
            block_stride, _, head_stride = strides
            if v_cache.stride()[:2] != (block_stride, head_stride):
                raise RuntimeError(f"transposed V cache strides {v_cache.stride()} are not {strides}")
            p.v_block_stride, p.v_slot_stride, p.v_head_stride = strides
            p.flags |= wideattn_ctypes.FLAG_V_TRANSPOSED
        else:
            p.v_block_stride, p.v_slot_stride, p.v_head_stride = v_cache.stride()[:3]
        p.o, p.o_token_stride, p.o_head_stride = o.data_ptr(), o.stride(0), o.stride(1)
        p.cu_seqlens_q = batch.cu_seqlens.data_ptr()
        p.seq_lens_k = batch.seq_lens_k.data_ptr()
        p.block_table = batch.block_table.data_ptr()
        p.block_table_stride = batch.block_table.stride(0)
        if scales:
            p.k_scale, p.v_scale = scales[0].data_ptr(), scales[1].data_ptr()
        p.num_seqs, p.total_q = batch.num_seqs, batch.total
        p.num_q_heads, p.num_kv_heads, p.head_dim = q.shape[1], k.shape[1], HEAD_DIM
        p.block_size, p.num_blocks = BLOCK_SIZE, batch.num_blocks
        p.q_dtype = wideattn_ctypes.DTYPE_E4M3 if self.q_e4m3 else wideattn_ctypes.DTYPE_BF16
        p.kv_dtype = wideattn_ctypes.DTYPE_E4M3 if self.kv_e4m3 else wideattn_ctypes.DTYPE_BF16
        p.o_dtype = wideattn_ctypes.DTYPE_BF16
        p.softmax_scale = SOFTMAX_SCALE
        if self.pin:                      # this call only: the other variants keep the dispatcher's
            self.lib.set_prefill_kernel(self.pin["name"])
        try:
            if self.kernel is None:
                index = self.lib.is_supported(p, *self.capability)  # raises UNSUPPORTED if absent
                self.kernel = self.lib.kernels()[index]["name"]
                if self.pin and self.kernel != self.pin["name"]:
                    raise RuntimeError(f"--e4m3-kernel {self.pin['name']} pinned but selection "
                                       f"chose {self.kernel}")
            self.lib.prefill(p, torch.cuda.current_stream().cuda_stream)
        finally:
            if self.pin:
                self.lib.set_prefill_kernel(None)
        torch.cuda.synchronize()          # a launch fault surfaces here, inside this variant
        return o


# ---- the model


class Model:
    """Weights of the decoder; LINEAR_NAMES are the per-layer matrices e4m3 rounding touches."""

    LINEAR_NAMES = ("wq", "wkv", "wo", "wg", "wu", "wd")

    def __init__(self, cfg, embed, layers, final_norm, lm_head, weights_label):
        self.cfg = cfg
        self.embed = embed            # [V, hidden] bf16
        self.layers = layers          # list of dicts
        self.final_norm = final_norm  # [hidden] float32
        self.lm_head = lm_head        # [V, hidden] float32 holding bf16 values
        self.weights_label = weights_label


def build_model(cfg):
    """Random weights with a fixed seed, scaled so the model behaves like a trained one.

    - Embedding entries N(0, 1): the residual starts at unit RMS (Gemma's sqrt(hidden) factor
      folded in). Linear weights N(0, 1 / fan_in). Sandwich norms (input, post-attention,
      pre-MLP, post-MLP) have weight 1, so every sublayer adds a unit-RMS update to a float32
      residual and attention keeps its share of the final state in every layer.
    - q_norm and k_norm weights = qk_norm_gain(layer) in every dim, so that with scale 1.0 the
      scores q.k have standard deviation score_std(layer) (ATTN_SCORE_STD_FIRST..LAST): broad
      attention early, sharp late, instead of the near one-hot attention that unit weights
      (score std sqrt(512) = 22.6) would give. V gets v_norm without weight.
    - The LM head as described at LOGIT_STD (peaked, context-dependent next-token distributions).
    """
    torch = _torch()
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(cfg.seed)

    def normal(rows, cols, std):
        return (torch.randn(rows, cols, generator=gen, device=dev, dtype=torch.float32) * std) \
            .to(torch.bfloat16)

    hidden, inter = cfg.hidden, cfg.intermediate
    q_out, kv_out = cfg.q_heads * HEAD_DIM, cfg.kv_heads * HEAD_DIM
    ones = torch.ones(hidden, device=dev)
    embed = normal(cfg.vocab, hidden, 1.0)
    layers = []
    for i in range(cfg.layers):
        gain = torch.full((HEAD_DIM,), cfg.qk_norm_gain(i), device=dev)
        layers.append({
            "wq": normal(q_out, hidden, hidden ** -0.5),
            "wkv": normal(kv_out, hidden, hidden ** -0.5),
            "wo": normal(hidden, q_out, q_out ** -0.5),
            "wg": normal(inter, hidden, hidden ** -0.5),
            "wu": normal(inter, hidden, hidden ** -0.5),
            "wd": normal(hidden, inter, inter ** -0.5),
            "q_norm": gain, "k_norm": gain, "input_norm": ones, "post_attn_norm": ones,
            "pre_ff_norm": ones, "post_ff_norm": ones})
    row_scale = torch.exp(cfg.lm_row_log_std
                          * torch.randn(cfg.vocab, 1, generator=gen, device=dev))
    row_scale = row_scale / row_scale.pow(2).mean().sqrt()
    lm_head = (torch.randn(cfg.vocab, hidden, generator=gen, device=dev)
               * (cfg.logit_std * hidden ** -0.5) * row_scale).to(torch.bfloat16).float()
    return Model(cfg, embed, layers, ones, lm_head, "bf16")


def round_model_e4m3(model):
    """A copy of the model whose linear weights are rounded to e4m3 per output channel; returns
    (model, mean relative RMS rounding error of those weights)."""
    layers, errors = [], []
    for layer in model.layers:
        rounded = dict(layer)
        for name in Model.LINEAR_NAMES:
            w = layer[name]
            rounded[name] = round_weight_per_channel(w)
            errors.append(((rounded[name].float() - w.float()).norm() / w.float().norm()).item())
        layers.append(rounded)
    return (Model(model.cfg, model.embed, layers, model.final_norm, model.lm_head, "e4m3"),
            sum(errors) / len(errors))


def forward(model, tokens, batch, attention, monitors=()):
    """Logits float32 [T, V] (after the final softcap) of a prefill over the packed batch.

    `attention` serves the global layers; sliding-window layers (when cfg.global_every > 1)
    use fp64 attention with SLIDING_WINDOW in every variant. monitors: (name, fn) pairs; fn(q, k,
    v) gives a float64 attention output of the same inputs, and the relative L2 error of
    `attention`'s output against it is recorded per global layer.
    """
    torch = _torch()
    F = torch.nn.functional
    cfg = model.cfg
    tokens_t = torch.tensor(tokens, dtype=torch.int64, device="cuda")
    x = model.embed[tokens_t].float()                                   # residual, float32
    total = x.shape[0]
    errors = {name: [] for name, _ in monitors}
    bf16 = torch.bfloat16
    local_attention = TorchReferenceAttention(batch, SLIDING_WINDOW)
    for index, w in enumerate(model.layers):
        is_global = cfg.is_global(index)
        h = rms_norm(x, w["input_norm"]).to(bf16)
        q = (h @ w["wq"].t()).view(total, cfg.q_heads, HEAD_DIM)
        kv = (h @ w["wkv"].t()).view(total, cfg.kv_heads, HEAD_DIM)
        q = batch.rope(rms_norm(q, w["q_norm"])).to(bf16).contiguous()
        k = batch.rope(rms_norm(kv, w["k_norm"])).to(bf16).contiguous()
        v = rms_norm(kv, None).to(bf16).contiguous()
        o = (attention if is_global else local_attention)(index, q, k, v)
        for name, fn in monitors if is_global else ():
            ref = fn(q, k, v)
            errors[name].append(((o.double() - ref).norm() / ref.norm()).item())
        a = o.reshape(total, cfg.q_heads * HEAD_DIM) @ w["wo"].t()
        x = x + rms_norm(a, w["post_attn_norm"])
        h = rms_norm(x, w["pre_ff_norm"]).to(bf16)
        m = (F.gelu(h @ w["wg"].t(), approximate="tanh") * (h @ w["wu"].t())) @ w["wd"].t()
        x = x + rms_norm(m, w["post_ff_norm"])
    h = rms_norm(x, model.final_norm).to(bf16).float()
    logits = h @ model.lm_head.t()
    return FINAL_SOFTCAP * torch.tanh(logits / FINAL_SOFTCAP), errors


# ---- dumps and gates


def write_dump(path, logits, targets, model_label, variant_label, engine, dtype=None):
    """An HDF5 logit dump in the docs/accuracy.md section 1 schema."""
    import h5py
    import numpy as np
    data = logits if dtype is None else logits.astype(dtype)
    with h5py.File(path, "w") as f:
        f.create_dataset("logits", data=data,
                         chunks=(min(data.shape[0], rows_per_chunk(data.shape[1], data.itemsize)),
                                 data.shape[1]))
        f.create_dataset("tokens", data=np.asarray(targets, dtype=np.int32))
        f.attrs["model"] = model_label
        f.attrs["variant"] = variant_label
        f.attrs["engine"] = engine


def run_cli_gate(cli, ref, cand, base, json_path, margin, margin_rel, confidence):
    """(verdict dict or None, why-not text): runs `wideattn accuracy gate --rule paired` and
    reads its JSON."""
    command = [cli, "accuracy", "gate", ref, cand, "--baseline", base, "--json", json_path,
               "--rule", "paired", "--confidence", repr(confidence),
               "--margin", repr(margin), "--margin-rel", repr(margin_rel)]
    print("$ " + " ".join(command), flush=True)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"CLI could not run: {exc}"
    print(result.stdout.rstrip(), flush=True)
    if result.stderr.strip():
        print(result.stderr.rstrip()[-2000:], flush=True)
    if result.returncode not in CLI_VERDICT_STATUS.values():
        return None, f"CLI exit status {result.returncode}: {result.stderr.strip()[-300:]}"
    try:
        with open(json_path) as handle:
            report = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, f"CLI ran (status {result.returncode}) but its JSON is unreadable: {exc}"
    gate = report["gate"]
    if CLI_VERDICT_STATUS.get(gate["verdict"]) != result.returncode:
        return None, f"CLI exit status {result.returncode} but its JSON says {gate['verdict']}"
    # Non-finite numbers come as the strings "inf", "-inf", "nan" (docs/accuracy.md section 5).
    out = {key: float(gate[key]) if gate.get(key) in ("inf", "-inf", "nan") else gate.get(key)
           for key in CLI_GATE_FIELDS}
    out.update(accept=bool(gate["accept"]), exit_status=result.returncode,
               candidate_mean_kl=float(report["candidate_drift"]["kl"]["mean"]),
               baseline_mean_kl=float(report["baseline_drift"]["kl"]["mean"]),
               json=os.path.basename(json_path))
    return out, None


def write_samples(out_dir, dump_dir, variants, targets, sample_rows, model_label):
    """float16 copies of the first sample_rows rows of every dump, packed into one tar."""
    import h5py
    import numpy as np
    if sample_rows <= 0:
        return None, []
    names, skipped = [], []
    for name, info in variants.items():
        if info["status"] != ST_OK:
            continue
        with h5py.File(info["dump"], "r") as f:
            rows = np.asarray(f["logits"][:sample_rows])
        path = os.path.join(dump_dir, "e2e_sample_" + name + ".h5")
        write_dump(path, rows, targets[:sample_rows], model_label,
                   info["variant_label"] + f" (first {sample_rows} rows, float16)",
                   info["engine"], dtype=np.float16)
        if os.path.getsize(path) > SAMPLE_MAX_BYTES:
            skipped.append(os.path.basename(path))
            os.remove(path)
        else:
            names.append(path)
    if not names:
        return None, skipped
    tar_path = os.path.join(out_dir, "e2e_samples.tar")
    with tarfile.open(tar_path, "w") as tar:
        for path in names:
            tar.add(path, arcname=os.path.basename(path))
    return tar_path, skipped


# ---- the run


def wiring_check(wiring, wideattn_logits, model, inputs, batch, errors, log):
    """The reference model again with fp64 PyTorch attention: its logits must match (a)'s."""
    try:
        torch_logits, _ = forward(model, inputs, batch, TorchReferenceAttention(batch))
        wiring["kl"] = kl_arrays(torch_logits.cpu().numpy(), wideattn_logits)
    except Exception as exc:  # report, never stop the run
        traceback.print_exc()
        wiring.update(ok=False, note=f"wiring check failed to run: {type(exc).__name__}: {exc}")
        errors.append(wiring["note"])
        return
    wiring.pop("note", None)
    wiring["ok"] = wiring["kl"]["mean"] <= WIRING_KL_MAX
    log(f"wiring check: mean KL(torch fp64 attention || wideattn-bf16) "
        f"{wiring['kl']['mean']:.3e}, max {wiring['kl']['max']:.3e}, top-1 agreement "
        f"{wiring['kl']['top1_agreement_percent']:.2f}%: {'ok' if wiring['ok'] else 'FAILED'}")
    if not wiring["ok"]:
        errors.append(f"wiring check failed: mean KL {wiring['kl']['mean']:.3e} > {WIRING_KL_MAX:g}")


def load_library(args):
    try:
        lib = wideattn_ctypes.Library(args.lib, args.bundle)
        kernels = lib.kernels()
        return lib, (f"libwideattn {lib.version()}, bundle {lib.bundle_dir()}, kernels "
                     + ", ".join(sorted({k['name'] + '/' + k['arch'] for k in kernels})))
    except (OSError, wideattn_ctypes.WideattnError) as exc:
        return None, f"libwideattn unavailable: {exc}"


@dataclasses.dataclass
class RunState:
    """What the steps of one run share: the arguments, the summary being written (its notes and
    errors lists), the log, and the batch, tokens and models once built."""
    args: object
    started: float
    summary: dict
    log: object
    batch: object = None
    inputs: object = None
    targets: object = None
    model: object = None
    model8: object = None
    exact: tuple = None
    monitors_on: bool = True
    lib_detail: str = ""
    engine: str = ""
    wiring: dict = None
    pin: dict = None              # --e4m3-kernel's resolve_e4m3_kernel, None without the option
    gated_candidate: str = V_CANDIDATE   # the 8-bit variant whose verdict sets the exit status

    @property
    def notes(self):
        return self.summary["notes"]

    @property
    def errors(self):
        return self.summary["errors"]


def start_run(args):
    """The run's state with an empty summary and a log that prefixes the elapsed time."""
    started = time.time()

    def log(message):
        print(f"[{time.time() - started:7.1f}s] {message}", flush=True)

    summary = {"config": dict(args.config.as_dict(), label=args.config.label()), "margin": args.margin,
               "margin_rel": args.margin_rel, "confidence": args.confidence, "variants": {},
               "notes": [], "errors": [], "timings_s": {}}
    return RunState(args=args, started=started, summary=summary, log=log)


def describe_environment(state):
    """Creates the CUDA context, loads libwideattn and records the machine; (lib, capability)."""
    torch = _torch()
    import numpy as np
    args, cfg, log = state.args, state.args.config, state.log
    torch.zeros(1, device="cuda")          # the primary context wideattn launches in
    props = torch.cuda.get_device_properties(0)
    capability = torch.cuda.get_device_capability(0)
    lib, state.lib_detail = load_library(args)
    state.summary["environment"] = {"gpu": props.name, "capability": list(capability),
                                    "torch": torch.__version__, "numpy": np.__version__,
                                    "wideattn": state.lib_detail, "commit": args.commit}
    log(f"{props.name} sm_{capability[0]}{capability[1]}, torch {torch.__version__}; {state.lib_detail}")
    log(f"model: {cfg.label()}; seqs {list(cfg.seq_lens)}; score std per layer "
        + ", ".join(f"{cfg.score_std(i):.2f}" for i in range(cfg.layers)))
    state.engine = f"tools/bench/e2e_drift.py, torch {torch.__version__}, {state.lib_detail}"
    return lib, capability


def build_models(state):
    """The batch, the tokens, and the model with its e4m3-rounded copy."""
    torch = _torch()
    cfg = state.args.config
    state.batch = Batch(cfg)
    state.inputs, state.targets = make_tokens(cfg.seq_lens, cfg.vocab, cfg.seed)
    t0 = time.time()
    state.model = build_model(cfg)
    state.model8, weight_err = round_model_e4m3(state.model)
    torch.cuda.synchronize()
    state.summary["timings_s"]["build_model"] = time.time() - t0
    state.summary["weight_rounding_rel_rms"] = weight_err
    state.log(f"weights built; e4m3 per-channel rounding: mean relative RMS error {weight_err:.4f}")


def variant_plans(state, lib, capability):
    """{variant: (weights model, attention or None when unavailable, monitors)}; the pinned
    kernel (state.pin) goes to the 8-bit variant of its dtypes."""
    batch, model, model8 = state.batch, state.model, state.model8
    pin = state.pin
    pin_of = lambda name: pin if pin and pin["variant"] == name else None
    exact = state.exact = ("fp64", lambda q, k, v: exact_attention(q, k, v, batch))
    emulate = EmulatedE4m3Attention(batch, P_SCALE_KERNEL, ATTN_E4M3_EMULATED)
    emulated_ref = ("e4m3-emulated", lambda q, k, v: exact_attention(
        *dequantized_e4m3_inputs(q, k, v), batch, P_SCALE_KERNEL))
    bf16_attention = TorchReferenceAttention(batch)
    if state.args.bf16_attention == ATTN_WIDEATTN_BF16:
        if lib is None:
            state.notes.append(f"BF16 attention falls back to {ATTN_TORCH_REFERENCE}: {state.lib_detail}")
        else:
            bf16_attention = WideattnAttention(lib, batch, False, capability)
    candidate_attention = None if lib is None else WideattnAttention(lib, batch, True, capability,
                                                                     pin=pin_of(V_CANDIDATE))
    candidate_q8_attention = None if lib is None else WideattnAttention(lib, batch, True, capability,
                                                                        q_e4m3=True,
                                                                        pin=pin_of(V_CANDIDATE_Q8))
    return {
        V_REFERENCE: (model, bf16_attention, [exact]),
        V_BASELINE: (model8, bf16_attention, [exact]),
        V_BROKEN: (model8, EmulatedE4m3Attention(batch, P_SCALE_BROKEN, ATTN_BROKEN_EMULATED),
                   [exact]),
        V_EMULATED: (model8, emulate, [exact]),
        V_KV_ONLY: (model8, EmulatedE4m3Attention(batch, None, ATTN_KV_ONLY_EMULATED, quantize_q=False),
                    [exact]),
        V_CANDIDATE: (model8, candidate_attention, [exact, emulated_ref]),
        V_CANDIDATE_Q8: (model8, candidate_q8_attention, [exact]),
        V_K_SMOOTH: (model8, EmulatedE4m3Attention(batch, P_SCALE_KERNEL, ATTN_K_SMOOTH_EMULATED,
                                                   smooth_k=True), [exact]),
        V_PER_TOKEN_KV: (model8, EmulatedE4m3Attention(batch, P_SCALE_KERNEL, ATTN_PER_TOKEN_KV_EMULATED,
                                                       per_token_kv=True), [exact]),
    }


def forward_variant(state, name, info, weights_model, attention, monitors):
    """Logits (numpy) of one variant, or None after recording why it did not run."""
    import numpy as np
    errors, log = state.errors, state.log
    letter = VARIANT_LETTERS[name]
    try:
        logits, attn_errors = forward(weights_model, state.inputs, state.batch, attention,
                                      monitors if state.monitors_on else ())
        logits = logits.cpu().numpy()
    except wideattn_ctypes.WideattnError as exc:
        if exc.status == wideattn_ctypes.STATUS_UNSUPPORTED and name in WIDEATTN_8BIT:
            info.update(status=ST_UNAVAILABLE, reason=str(exc))
            log(f"({letter}) {name}: the 8-bit kernel is NOT in the bundle for this GPU "
                f"(WIDEATTN_ERROR_UNSUPPORTED): {exc}")
        else:
            info.update(status=ST_FAILED, reason=str(exc))
            errors.append(f"({letter}) {name} failed: {exc}")
            log(f"({letter}) {name}: FAILED - {exc}")
        return None
    except Exception as exc:  # CUDA faults, out of memory: record and go on to the gates
        traceback.print_exc()
        info.update(status=ST_FAILED, reason=f"{type(exc).__name__}: {exc}"[:500])
        errors.append(f"({letter}) {name} failed: {info['reason']}")
        return None
    if not np.isfinite(logits).all():
        info.update(status=ST_FAILED, reason="non-finite logits")
        errors.append(f"({letter}) {name} produced non-finite logits")
        return None
    info["attention_rel_l2_per_layer"] = attn_errors
    return logits


def run_variant(state, name, plans):
    """Runs one variant and writes its dump; a failing wideattn-bf16 reference is run again with
    the torch reference attention, which then also serves the baseline (plans updated)."""
    args, log = state.args, state.log
    weights_model, attention, monitors = plans[name]
    letter = VARIANT_LETTERS[name]
    info = {"weights": weights_model.weights_label,
            "attention": attention.name if attention else ATTN_WIDEATTN_E4M3,
            "dump": os.path.join(args.dump_dir, DUMP_NAMES[name]), "engine": state.engine}
    info["variant_label"] = f"{info['weights']} weights + {info['attention']} attention"
    state.summary["variants"][name] = info
    if attention is None:
        info.update(status=ST_UNAVAILABLE, reason=state.lib_detail)
        log(f"({letter}) {name}: UNAVAILABLE - {state.lib_detail}")
        return
    t0 = time.time()
    logits = forward_variant(state, name, info, weights_model, attention, monitors)
    if logits is None and name == V_REFERENCE and isinstance(attention, WideattnAttention):
        state.notes.append(f"wideattn-bf16 failed on (a) ({info['reason']}); (a) and (b) use "
                           f"{ATTN_TORCH_REFERENCE} instead")
        attention = TorchReferenceAttention(state.batch)
        plans[V_BASELINE] = (state.model8, attention, [state.exact])
        state.wiring["backend"] = attention.name
        info.update(attention=attention.name, reason=None,
                    variant_label=f"{info['weights']} weights + {attention.name} attention")
        logits = forward_variant(state, name, info, weights_model, attention, [])
    if logits is None:
        return
    if isinstance(attention, WideattnAttention):
        info["kernel"] = attention.kernel
        if attention.kv_e4m3:
            info["kernel_pinned"] = attention.pin is not None
            info["v_layout"] = attention.v_layout
    info["forward_s"] = time.time() - t0
    write_dump(info["dump"], logits, state.targets, args.config.label(), info["variant_label"], state.engine)
    info["status"] = ST_OK
    errs = "; ".join(f"rel L2 vs {k}: " + " ".join(f"{e:.2e}" for e in v)
                     for k, v in info["attention_rel_l2_per_layer"].items())
    log(f"({letter}) {name}: {info['variant_label']} {info['forward_s']:.1f} s"
        + (f" (kernel {info['kernel']}{', pinned' if info.get('kernel_pinned') else ''}"
           f"{', V ' + info['v_layout'] if 'v_layout' in info else ''})" if "kernel" in info else "")
        + (f"; attention per layer {errs}" if errs else ""))
    if name != V_REFERENCE:
        return
    state.summary["reference_distribution"] = dist = distribution_stats(logits)
    log(f"reference next-token distributions: mean top-1 p {dist['mean_top1_prob']:.3f} "
        f"(median {dist['median_top1_prob']:.3f}), mean entropy "
        f"{dist['mean_entropy_nats']:.2f} nats (median {dist['median_entropy_nats']:.2f})")
    if isinstance(attention, WideattnAttention):
        wiring_check(state.wiring, logits, state.model, state.inputs, state.batch, state.errors, log)


def gate_variant(state, name, paths, per_token, cli_usable):
    """One gated variant's verdict by the paired rule: the mirror above on the numpy per-token
    KL, and the CLI's when it runs, which must agree; without the CLI the mirror decides and
    writes a report in the CLI's format. Returns whether the CLI is still usable."""
    args, info = state.args, state.summary["variants"][name]
    letter = VARIANT_LETTERS[name]
    mirror = paired_gate(per_token[name], per_token[V_BASELINE], args.margin, args.margin_rel,
                         args.confidence)
    gate = {"numpy": mirror, "margin": mirror["margin"], "upper_bound": mirror["upper_bound"]}
    info["gate"] = gate
    cli_result, why = None, None
    if cli_usable:
        cli_result, why = run_cli_gate(args.cli, paths["reference"], info["dump"], paths["baseline"],
                                       os.path.join(args.out, f"gate_{name}.json"), args.margin,
                                       args.margin_rel, args.confidence)
    if cli_result is None:
        if why:
            state.notes.append(f"({letter}) {why}; numpy decides")
            cli_usable = False
        gate.update(source="numpy", verdict=mirror["verdict"], accept=mirror["verdict"] == "ACCEPT")
        fallback = {"tool": "tools/bench/e2e_drift.py numpy fallback (not the wideattn CLI)",
                    "command": "gate", "reference": paths["reference"], "candidate": info["dump"],
                    "baseline": paths["baseline"], "candidate_drift": info["kl_vs_reference"],
                    "gate": dict(mirror, margin_absolute=args.margin, margin_relative=args.margin_rel)}
        with open(os.path.join(args.out, f"gate_{name}_numpy.json"), "w") as handle:
            json.dump(fallback, handle, indent=1)
    else:
        gate.update(cli=cli_result, source="cli", verdict=cli_result["verdict"],
                    accept=cli_result["accept"], upper_bound=cli_result["upper_bound"])
        check_cli_gate(state, letter, cli_result, mirror)
    state.log(f"({letter}) {name}: mean KL difference vs (b) "
              f"{mirror.get('mean_difference', math.inf):.4e}, {100 * args.confidence:g}% bounds "
              f"[{mirror['lower_bound']:.4e}, {mirror['upper_bound']:.4e}] vs margin "
              f"{gate['margin']:.4e} -> {gate['verdict']} (by {gate['source']})")
    return cli_usable


def check_cli_gate(state, letter, cli_result, mirror):
    """Errors where the CLI's paired report and the numpy mirror disagree."""
    for label, cli_value, np_value in (
            ("candidate mean KL", cli_result["candidate_mean_kl"], mirror["candidate_mean_kl"]),
            ("baseline mean KL", cli_result["baseline_mean_kl"], mirror["baseline_mean_kl"]),
            ("mean KL difference", cli_result["mean_difference"], mirror.get("mean_difference")),
            ("upper bound", cli_result["upper_bound"], mirror["upper_bound"])):
        numbers = isinstance(cli_value, (int, float)) and np_value is not None
        if not numbers or not means_agree(cli_value, np_value):
            state.errors.append(f"({letter}) CLI and numpy disagree on the {label}: "
                                f"{cli_value!r} vs {np_value!r}")
    if cli_result["verdict"] != mirror["verdict"]:
        state.errors.append(f"({letter}) CLI verdict {cli_result['verdict']} but numpy says "
                            f"{mirror['verdict']}")


def drift_and_gates(state):
    """KL of every variant that ran against (a) and (b) (numpy over the files), then the paired
    gate of each gated variant against the baseline (b)."""
    variants = state.summary["variants"]
    ok = {name for name, info in variants.items() if info["status"] == ST_OK}
    if not {V_REFERENCE, V_BASELINE} <= ok:
        state.errors.append("reference or baseline missing: nothing to gate")
        return
    paths = {"reference": variants[V_REFERENCE]["dump"], "baseline": variants[V_BASELINE]["dump"]}
    per_token = {}
    for name in (V_BASELINE,) + GATED:
        if name in ok:
            variants[name]["kl_vs_reference"], kl = kl_files(paths["reference"], variants[name]["dump"],
                                                             per_token=True)
            per_token[name] = kl.tolist()
        if name in ok and name != V_BASELINE:
            variants[name]["kl_vs_baseline"] = kl_files(paths["baseline"], variants[name]["dump"])
    if {V_CANDIDATE, V_EMULATED} <= ok:
        state.summary["candidate_vs_emulated"] = kl_files(variants[V_EMULATED]["dump"],
                                                          variants[V_CANDIDATE]["dump"])
    cli_usable = os.path.exists(state.args.cli)
    if not cli_usable:
        state.notes.append(f"CLI {state.args.cli} not found: verdicts from the numpy KL")
    for name in GATED:
        if name in ok:
            try:
                cli_usable = gate_variant(state, name, paths, per_token, cli_usable)
            except ValueError as exc:  # a baseline KL that is not finite: the CLI exits 2 there
                state.errors.append(f"({VARIANT_LETTERS[name]}) {name} not gated: {exc}")


def finish_run(state):
    """Writes the samples and e2e_summary.json, prints the summary; returns the exit status."""
    args, summary, errors = state.args, state.summary, state.errors
    variants = summary["variants"]
    tar_path, skipped = write_samples(args.out, args.dump_dir, variants, state.targets,
                                      args.sample_rows, args.config.label())
    summary["samples"] = {"tar": tar_path and os.path.basename(tar_path), "rows": args.sample_rows,
                          "skipped_over_size_limit": skipped}

    candidate = variants.get(state.gated_candidate, {})
    broken_gate = variants.get(V_BROKEN, {}).get("gate")
    if broken_gate is None:
        errors.append("the broken variant was not gated")
    exit_status = decide_exit(errors, state.wiring["ok"], candidate.get("status"),
                              (candidate.get("gate") or {}).get("verdict"),
                              broken_gate["verdict"] if broken_gate else None)
    summary["exit_status"] = exit_status
    summary["exit_meaning"] = EXIT_MEANINGS[exit_status]
    summary["timings_s"]["total"] = time.time() - state.started
    with open(os.path.join(args.out, "e2e_summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1, default=str)
    print(format_summary(summary), flush=True)
    print(f"dumps: {args.dump_dir}; reports: {args.out}", flush=True)
    return exit_status


def pin_e4m3_kernel(state, lib):
    """Resolves --e4m3-kernel against the bundle (state.pin, state.gated_candidate and the
    summary's "e4m3_kernel"); None to go on, or the exit status of a refusal."""
    name = state.args.e4m3_kernel
    state.summary["e4m3_kernel"] = None
    state.summary["gated_candidate"] = V_CANDIDATE
    if not name:
        return None
    try:
        if lib is None:
            raise KernelPinError(f"--e4m3-kernel {name}: {state.lib_detail}", EXIT_NO_CANDIDATE)
        state.pin = resolve_e4m3_kernel(lib.kernels(), name)
    except KernelPinError as exc:
        print(f"e2e_drift.py: error: {exc}", file=sys.stderr, flush=True)
        return exc.status
    state.gated_candidate = state.pin["variant"]
    state.summary["e4m3_kernel"] = dict(state.pin)
    state.summary["gated_candidate"] = state.gated_candidate
    state.log(f"--e4m3-kernel {name}: pinned for ({VARIANT_LETTERS[state.gated_candidate]}) "
              f"{state.gated_candidate}, V cache in the {state.pin['v_layout']} layout; that variant's "
              f"verdict sets the exit status")
    return None


def run(args):
    _torch()  # without torch the run stops here, before it makes any directory
    state = start_run(args)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.dump_dir, exist_ok=True)
    lib, capability = describe_environment(state)
    status = pin_e4m3_kernel(state, lib)
    if status is not None:
        return status
    build_models(state)
    state.monitors_on = not args.no_attn_check
    plans = variant_plans(state, lib, capability)
    state.wiring = {"backend": plans[V_REFERENCE][1].name, "ok": True,
                    "note": "not run (the BF16 attention is the torch reference itself)"}
    state.summary["wiring"] = state.wiring
    for name in VARIANT_ORDER:
        run_variant(state, name, plans)
    # Drift: numpy over the files (always), the CLI gate (when it runs). No GPU work from here
    # on: a faulting 8-bit kernel may have left the CUDA context unusable.
    t0 = time.time()
    drift_and_gates(state)
    state.summary["timings_s"]["drift_and_gates"] = time.time() - t0
    return finish_run(state)


def default_out_dir():
    return os.environ.get("OUT") or os.path.join(os.getcwd(), "e2e_out")


def add_path_args(parser):
    paths = parser.add_argument_group("paths")
    paths.add_argument("--out", default=default_out_dir(),
                       help="directory for the gate JSON reports, e2e_summary.json and "
                            "e2e_samples.tar (small files only; default $OUT or ./e2e_out)")
    paths.add_argument("--dump-dir", default=os.path.join(tempfile.gettempdir(), "wideattn_e2e"),
                       help="directory for the full float32 logit dumps e2e_<variant>.h5 "
                            "(256 MiB each at the default size; kept outside --out)")
    paths.add_argument("--lib", default=os.path.join(ROOT_DIR, "build/dispatch/libwideattn.so"),
                       help="libwideattn.so; if it does not load, the BF16 attention falls back "
                            "to the torch reference and the candidate is unavailable")
    paths.add_argument("--bundle", default=os.path.join(ROOT_DIR, "build/bundle"),
                       help="bundle directory (cubins + manifest.json) given to wideattn_open")
    paths.add_argument("--cli", default=os.path.join(ROOT_DIR, "build/tools/wideattn"),
                       help="the wideattn CLI whose `accuracy gate` decides; if it cannot run "
                            "(e.g. no libhdf5 on the machine) the numpy KL decides")


def add_model_args(parser):
    model = parser.add_argument_group("model and tokens")
    model.add_argument("--model", choices=MODEL_CHOICES, default=MODEL_OWN,
                       help=f"{MODEL_OWN}: the decoder of this script (the 8-bit variants); "
                            f"{MODEL_TRANSFORMERS}: transformers' Gemma4ForCausalLM with Gemma 4 31B's "
                            "attention shapes (tools/bench/hf_gemma4.py): float32-attention reference, "
                            "bf16 SDPA baseline, attn_implementation='wideattn' candidate, paired gate; "
                            "exit 0 accept, 1 reject, 4 inconclusive, 2 error")
    model.add_argument("--hf-e4m3", action="store_true",
                       help=f"with --model {MODEL_TRANSFORMERS}: gate the 8-bit path instead (hf_gemma4.py "
                            "E4M3_ATTENTION: K/V quantised into an e4m3 cache with V transposed, bf16 Q) "
                            "against SDPA, both on e4m3-rounded linear weights, margin relative to that "
                            "baseline's drift")
    model.add_argument("--vocab", type=int, default=DEFAULT_VOCAB, help="vocabulary size")
    model.add_argument("--hidden", type=int, default=DEFAULT_HIDDEN, help="residual width")
    model.add_argument("--layers", type=int, default=DEFAULT_LAYERS,
                       help="decoder layers (all global attention)")
    model.add_argument("--global-every", type=int, default=DEFAULT_GLOBAL_EVERY,
                       help="every Nth layer (N-1, 2N-1, ...) is global and runs the variant's "
                            "attention; the others are sliding-window layers (window "
                            f"{SLIDING_WINDOW}) with fp64 attention in every variant. 1 = all "
                            "global (the hardest case); 6 with --layers 6 = Gemma 4's ratio")
    model.add_argument("--kv-heads", type=int, default=DEFAULT_KV_HEADS,
                       help=f"KV heads; query heads = {GROUP} x this (head dim {HEAD_DIM})")
    model.add_argument("--mlp-ratio", type=int, default=DEFAULT_MLP_RATIO,
                       help="GeGLU intermediate size / hidden")
    model.add_argument("--seq-lens", default=DEFAULT_SEQ_LENS,
                       help="comma-separated prompt lengths of the varlen prefill batch")
    model.add_argument("--seed", type=int, default=DEFAULT_SEED, help="weights and tokens seed")
    model.add_argument("--logit-std", type=float, default=DEFAULT_LOGIT_STD,
                       help="RMS of the raw logits before the softcap: higher = more peaked up "
                            "to the softcap's saturation (see LM head notes in build_model)")
    model.add_argument("--lm-row-log-std", type=float, default=DEFAULT_LM_ROW_LOG_STD,
                       help="std of log row scale of the LM head: spread between 'frequent' "
                            "and 'rare' tokens")


def add_gate_args(parser):
    gate = parser.add_argument_group("gate and checks")
    gate.add_argument("--bf16-attention", choices=BF16_ATTN_CHOICES, default=ATTN_WIDEATTN_BF16,
                      help="attention of the reference (a) and baseline (b)")
    gate.add_argument("--margin", type=float, default=0.0,
                      help="absolute margin in nats of the paired gate on the mean per-token KL "
                           "difference (passed to `accuracy gate --margin`)")
    gate.add_argument("--margin-rel", type=float, default=0.0,
                      help="relative gate margin, a fraction of the baseline's mean KL "
                           "(`accuracy gate --margin-rel`)")
    gate.add_argument("--confidence", type=float, default=GATE_CONFIDENCE,
                      help="one-sided confidence of the paired gate's bounds, in [0.5, 1) "
                           "(`accuracy gate --confidence`)")
    gate.add_argument("--no-attn-check", action="store_true",
                      help="skip the per-layer relative L2 of each attention output against an "
                           "fp64 attention of the same inputs (and, for the kernel, against the "
                           "e4m3 emulation)")
    gate.add_argument("--sample-rows", type=int, default=DEFAULT_SAMPLE_ROWS,
                      help="rows of each dump copied as float16 into e2e_samples.tar (sample "
                           f"dumps over {SAMPLE_MAX_BYTES} bytes are dropped); 0 = none")
    gate.add_argument("--e4m3-kernel", metavar="NAME", default=None,
                      help="pin the 8-bit prefill kernel NAME (wideattn_set_prefill_kernel) for the "
                           "8-bit variant of its dtypes: bf16 Q -> (c) candidate, e4m3 Q -> (g) "
                           "candidate_q8, whose verdict then sets the exit status; a kernel with the "
                           f"'{FEATURE_V_TRANSPOSED}' feature gets the transposed V cache "
                           "(WIDEATTN_FLAG_V_TRANSPOSED). Refused with exit 3 when the bundle has no "
                           "prefill kernel NAME, 2 when its dtypes serve neither variant; default: the "
                           "dispatcher's choice")
    gate.add_argument("--commit", default=os.environ.get("WIDEATTN_COMMIT"),
                      help="git commit recorded in e2e_summary.json (default $WIDEATTN_COMMIT)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 candidate accepted and broken rejected; 1 wrong gate outcome; "
               "2 error; 3 8-bit kernel not in the bundle (broken rejected; with --e4m3-kernel, "
               "also the bundle lacking that kernel); 4 the gate was inconclusive for the candidate "
               "or broken. With --e4m3-kernel the candidate is the variant running the pinned kernel.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_path_args(parser)
    add_model_args(parser)
    add_gate_args(parser)
    parser.add_argument("--self-test", action="store_true",
                        help="check the pure-Python parts (no torch, no GPU) and exit")
    args = parser.parse_args(argv)
    if args.self_test:
        return args
    try:
        seq_lens = parse_seq_lens(args.seq_lens)
    except ValueError as exc:
        parser.error(str(exc))
    for name in ("vocab", "hidden", "layers", "kv_heads", "mlp_ratio", "global_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.global_every > args.layers:
        parser.error("--global-every larger than --layers leaves no global layer")
    if args.margin < 0 or args.margin_rel < 0:
        parser.error("--margin and --margin-rel must be >= 0")
    if not 0.5 <= args.confidence < 1.0:
        parser.error(f"--confidence must lie in [0.5, 1), got {args.confidence}")
    if args.hf_e4m3 and args.model != MODEL_TRANSFORMERS:
        parser.error(f"--hf-e4m3 gates transformers' model: it needs --model {MODEL_TRANSFORMERS}")
    if args.e4m3_kernel is not None:
        if not args.e4m3_kernel or not set(args.e4m3_kernel) <= KERNEL_NAME_CHARS:
            parser.error(f"--e4m3-kernel '{args.e4m3_kernel}' is not a kernel name (letters, digits, _)")
        if args.model != MODEL_OWN:
            parser.error(f"--e4m3-kernel pins the 8-bit variants of --model {MODEL_OWN} only")
    args.config = ModelConfig(vocab=args.vocab, hidden=args.hidden, layers=args.layers,
                              kv_heads=args.kv_heads, mlp_ratio=args.mlp_ratio,
                              seq_lens=seq_lens, seed=args.seed, logit_std=args.logit_std,
                              lm_row_log_std=args.lm_row_log_std,
                              global_every=args.global_every)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    if args.model == MODEL_TRANSFORMERS:
        sys.path.insert(0, os.path.join(ROOT_DIR, "build", "python"))
        import hf_gemma4
        return hf_gemma4.run_e2e(args, sys.modules[__name__])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
