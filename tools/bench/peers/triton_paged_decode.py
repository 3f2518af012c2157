"""Triton paged split-KV decode attention, the peer a serving engine ships for decode steps.

The layout of the engines' Triton decode attention (vLLM's and SGLang's decode_attention, after
lightllm's grouped flash decoding), written here for the semantics of docs/design.md section 2:
paged cache k_cache[block][slot][kv_head][d] read through a block table, GQA, 1 to MAX_Q_LEN
query tokens per sequence (decode and speculative verification) with the bottom-right causal
mask, online softmax with exp2 and log2(e) folded into the scale, fp32 accumulation.

Stage 1: one program per (sequence, KV head, split) holds all GROUP query heads of its KV head
for the sequence's q_len tokens (rows = token x head, padded to BLOCK_H >= 16 rows for tl.dot),
runs the online softmax over its contiguous segment of the sequence's keys and writes the
normalised partial O and its log2-sum-exp to float32 scratch. Stage 2: one program per (query
token, query head) merges the splits into o. e4m3 K/V (torch.float8_e4m3fn) is dequantised in
the kernel: the codes widen to bf16 exactly, the per-tensor K scale multiplies the scores and
the V scale the partial output.

Split count as SGLang chooses it: enough (sequence, KV head, split) programs for SPLIT_WAVES per
SM, at most MAX_SPLITS and at least MIN_SPLIT_KEYS keys per split of the longest sequence.
"""

import dataclasses

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_Q_LEN = 8          # decode and speculative verification: 1 .. 8 query tokens per sequence
MIN_DOT_ROWS = 16      # tl.dot needs at least 16 rows
MAX_SPLITS = 64
MIN_SPLIT_KEYS = 256
SPLIT_WAVES = 2


@dataclasses.dataclass(frozen=True)
class Config:
    """One launch configuration of the split kernel (rows follow from GROUP x q_len)."""

    block_n: int
    num_warps: int
    num_stages: int

    def label(self):
        return f"N{self.block_n} w{self.num_warps} s{self.num_stages}"


ENGINE_CONFIG = Config(block_n=32, num_warps=4, num_stages=2)
MERGE_WARPS = 4
MAX_WARPS = 8


def warps_for(rows, config):
    """The config's warps for MIN_DOT_ROWS rows, doubled per doubling of the rows up to MAX_WARPS
    (keeps the [rows, HEAD_DIM] fp32 accumulator's registers per thread bounded)."""
    return min(MAX_WARPS, config.num_warps * max(1, rows // MIN_DOT_ROWS))


def block_rows(group, q_len):
    """Rows of a stage-1 program: GROUP heads x q_len tokens, a power of two >= MIN_DOT_ROWS."""
    return max(MIN_DOT_ROWS, triton.next_power_of_2(group * q_len))


def choose_splits(num_seqs, num_kv_heads, max_seq_len, num_sms):
    """Splits per (sequence, KV head): SPLIT_WAVES programs per SM, bounded by MAX_SPLITS and
    by MIN_SPLIT_KEYS keys per split."""
    programs = max(1, num_seqs * num_kv_heads)
    wanted = -(-SPLIT_WAVES * num_sms // programs)
    by_keys = max(1, max_seq_len // MIN_SPLIT_KEYS)
    return max(1, min(MAX_SPLITS, wanted, by_keys))


@triton.jit
def _decode_split_kernel(
        q_ptr, k_ptr, v_ptr, mid_o_ptr, mid_lse_ptr,
        seq_ids_ptr, cu_seqlens_q_ptr, seq_lens_k_ptr, block_table_ptr, k_scale_ptr, v_scale_ptr,
        q_token_stride, q_head_stride,
        k_block_stride, k_slot_stride, k_head_stride,
        v_block_stride, v_slot_stride, v_head_stride,
        block_table_stride, mid_split_stride, mid_token_stride, lse_split_stride, lse_token_stride,
        scale_log2, num_splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, BLOCK_H: tl.constexpr,
        BLOCK_N: tl.constexpr, KV_FP8: tl.constexpr):
    seq = tl.load(seq_ids_ptr + tl.program_id(0))
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    q_begin = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_begin
    num_keys = tl.load(seq_lens_k_ptr + seq)
    context = num_keys - q_len

    rows = tl.arange(0, BLOCK_H)
    tok = rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    row_valid = tok < q_len
    dims = tl.arange(0, HEAD_DIM)
    q_offs = (q_begin + tok)[:, None].to(tl.int64) * q_token_stride + head[:, None] * q_head_stride + dims[None, :]
    q = tl.load(q_ptr + q_offs, mask=row_valid[:, None], other=0.0)

    score_scale = scale_log2
    out_scale = 1.0
    if KV_FP8:
        score_scale = score_scale * tl.load(k_scale_ptr)
        out_scale = tl.load(v_scale_ptr)

    # This split's keys: a contiguous range of whole BLOCK_N tiles.
    per_split = tl.cdiv(tl.cdiv(num_keys, num_splits), BLOCK_N) * BLOCK_N
    seg_begin = split * per_split
    seg_end = tl.minimum(seg_begin + per_split, num_keys)
    last_key = tl.where(row_valid, context + tok, -1)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    table_row = block_table_ptr + seq.to(tl.int64) * block_table_stride
    keys = tl.arange(0, BLOCK_N)
    for start in range(seg_begin, seg_end, BLOCK_N):
        key = start + keys
        key_valid = key < seg_end
        block = tl.load(table_row + key // PAGE, mask=key_valid, other=0).to(tl.int64)
        slot = key % PAGE
        k_offs = (block * k_block_stride + slot * k_slot_stride + kv_head * k_head_stride)[None, :] + dims[:, None]
        k = tl.load(k_ptr + k_offs, mask=key_valid[None, :], other=0.0)
        if KV_FP8:
            k = k.to(tl.bfloat16)
        s = tl.dot(q, k) * score_scale
        s = tl.where((key[None, :] <= last_key[:, None]) & key_valid[None, :], s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v_offs = (block * v_block_stride + slot * v_slot_stride + kv_head * v_head_stride)[:, None] + dims[None, :]
        v = tl.load(v_ptr + v_offs, mask=key_valid[:, None], other=0.0)
        if KV_FP8:
            v = v.to(tl.bfloat16)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new

    denom = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc * (out_scale / denom)[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(denom))
    token = (q_begin + tok).to(tl.int64)
    mid_row = split.to(tl.int64) * mid_split_stride + token * mid_token_stride + head * HEAD_DIM
    tl.store(mid_o_ptr + mid_row[:, None] + dims[None, :], out, mask=row_valid[:, None])
    lse_row = split.to(tl.int64) * lse_split_stride + token * lse_token_stride + head
    tl.store(mid_lse_ptr + lse_row, lse, mask=row_valid)


@triton.jit
def _merge_splits_kernel(
        mid_o_ptr, mid_lse_ptr, o_ptr, seq_ids_ptr, cu_seqlens_q_ptr,
        o_token_stride, o_head_stride, mid_split_stride, mid_token_stride, lse_split_stride, lse_token_stride,
        num_splits, MAX_Q: tl.constexpr, HEAD_DIM: tl.constexpr):
    prog = tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.load(seq_ids_ptr + prog // MAX_Q)
    tok = prog % MAX_Q
    q_begin = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_begin
    if tok < q_len:
        dims = tl.arange(0, HEAD_DIM)
        token = (q_begin + tok).to(tl.int64)
        m = float("-inf")
        total = 0.0
        acc = tl.zeros([HEAD_DIM], tl.float32)
        for split in range(0, num_splits):
            lse = tl.load(mid_lse_ptr + split * lse_split_stride + token * lse_token_stride + head)
            m_new = tl.maximum(m, lse)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            old = tl.math.exp2(m - m_safe)
            weight = tl.math.exp2(lse - m_safe)
            part = tl.load(mid_o_ptr + split * mid_split_stride + token * mid_token_stride + head * HEAD_DIM + dims)
            acc = acc * old + weight * part
            total = total * old + weight
            m = m_new
        out = acc / tl.where(total == 0.0, 1.0, total)
        tl.store(o_ptr + token * o_token_stride + head * o_head_stride + dims, out.to(o_ptr.dtype.element_ty))


class PagedDecode:
    """Launcher for one batch layout: the sequences it serves (q_len 1..MAX_Q_LEN), their split
    count and the float32 scratch of the partial results, built once."""

    def __init__(self, q_lens, cu_seqlens_q, seq_lens_k, block_table, num_q_heads, num_kv_heads,
                 head_dim, page_size, softmax_scale, num_sms, num_splits=None):
        self.seq_list = [seq for seq, q_len in enumerate(q_lens) if 0 < q_len <= MAX_Q_LEN]
        if not self.seq_list:
            raise ValueError("PagedDecode: no sequence with 1..%d query tokens" % MAX_Q_LEN)
        self.max_q = max(q_lens[seq] for seq in self.seq_list)
        self.group = num_q_heads // num_kv_heads
        self.num_q_heads, self.num_kv_heads, self.head_dim = num_q_heads, num_kv_heads, head_dim
        self.page_size = page_size
        self.scale_log2 = softmax_scale * LOG2E
        self.cu_seqlens_q, self.seq_lens_k, self.block_table = cu_seqlens_q, seq_lens_k, block_table
        device = cu_seqlens_q.device
        self.seq_ids = torch.tensor(self.seq_list, dtype=torch.int32, device=device)
        max_keys = int(seq_lens_k[self.seq_ids.long()].max().item())
        self.num_splits = num_splits or choose_splits(len(self.seq_list), num_kv_heads, max_keys, num_sms)
        total_q = int(cu_seqlens_q[-1].item())
        self.mid_o = torch.empty(self.num_splits, total_q, num_q_heads, head_dim, dtype=torch.float32,
                                 device=device)
        self.mid_lse = torch.empty(self.num_splits, total_q, num_q_heads, dtype=torch.float32, device=device)
        self.rows = block_rows(self.group, self.max_q)

    def label(self, config):
        return f"N{config.block_n} w{warps_for(self.rows, config)} s{config.num_stages} H{self.rows} " \
            f"splits {self.num_splits}"

    def __call__(self, q, k_cache, v_cache, o, config=ENGINE_CONFIG, k_scale=None, v_scale=None):
        """o rows of the served sequences = attention; q/o [tokens, Hq, D] bf16, caches
        [blocks, page, Hkv, D] bf16 or float8_e4m3fn (then k_scale / v_scale: float32 [1])."""
        fp8 = k_cache.dtype == torch.float8_e4m3fn
        if fp8 and (k_scale is None or v_scale is None):
            raise ValueError("PagedDecode: e4m3 K/V needs k_scale and v_scale")
        scales = (k_scale, v_scale) if fp8 else (self.seq_lens_k, self.seq_lens_k)  # unread without fp8
        mid_strides = (self.mid_o.stride(0), self.mid_o.stride(1), self.mid_lse.stride(0), self.mid_lse.stride(1))
        grid = (len(self.seq_list), self.num_kv_heads, self.num_splits)
        _decode_split_kernel[grid](
            q, k_cache, v_cache, self.mid_o, self.mid_lse,
            self.seq_ids, self.cu_seqlens_q, self.seq_lens_k, self.block_table, scales[0], scales[1],
            q.stride(0), q.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            self.block_table.stride(0), *mid_strides, self.scale_log2, self.num_splits,
            GROUP=self.group, HEAD_DIM=self.head_dim, PAGE=self.page_size, BLOCK_H=self.rows,
            BLOCK_N=config.block_n, KV_FP8=fp8, num_warps=warps_for(self.rows, config),
            num_stages=config.num_stages)
        merge_grid = (len(self.seq_list) * self.max_q, self.num_q_heads)
        _merge_splits_kernel[merge_grid](
            self.mid_o, self.mid_lse, o, self.seq_ids, self.cu_seqlens_q,
            o.stride(0), o.stride(1), *mid_strides, self.num_splits,
            MAX_Q=self.max_q, HEAD_DIM=self.head_dim, num_warps=MERGE_WARPS)
