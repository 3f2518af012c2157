"""General Triton paged prefill attention, the peer a serving engine ships.

Semantics of docs/design.md section 2: varlen batch (cu_seqlens_q, seq_lens_k), paged KV cache
k_cache[block][slot][kv_head][d] read through a block table, bottom-right causal mask with
cached context, GQA (query head h reads KV head h // group), online softmax with exp2 and
log2(e) folded into the scale, fp32 accumulation, bf16 output. The head dim is a constexpr
loaded as one full tile.

One program handles BLOCK_M query rows of one sequence. With PACK_HEADS = 1 (the engine
layout) the rows are BLOCK_M tokens of one query head; with PACK_HEADS = group the rows are
BLOCK_M / group tokens x the group's query heads, so every K/V tile loaded serves all heads of
its KV head. Programs are mapped to (sequence, first token) by a small host-built table.
"""

import dataclasses

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@dataclasses.dataclass(frozen=True)
class Config:
    """One launch configuration of the kernel."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    pack_heads: bool = False

    def label(self):
        pack = " pack" if self.pack_heads else ""
        return f"M{self.block_m} N{self.block_n} w{self.num_warps} s{self.num_stages}{pack}"


ENGINE_CONFIG = Config(block_m=16, block_n=32, num_warps=4, num_stages=3)

TUNE_BLOCK_M = (16, 32, 64)
TUNE_BLOCK_N = (32, 64)
TUNE_WARPS = (4, 8)
TUNE_STAGES = (1, 2)
PACKED_BLOCK_M = (64,)


def tuning_space(group):
    """The tuned search space: per-head configs, then head-packed ones (rows = tokens x heads)."""
    configs = [Config(m, n, w, s) for m in TUNE_BLOCK_M for n in TUNE_BLOCK_N
               for w in TUNE_WARPS for s in TUNE_STAGES]
    for m in PACKED_BLOCK_M:
        if m % group == 0:
            configs += [Config(m, n, w, s, pack_heads=True) for n in TUNE_BLOCK_N
                        for w in TUNE_WARPS for s in TUNE_STAGES]
    return configs


@triton.jit
def _paged_prefill_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr,
        prog_seq_ptr, prog_tok_ptr, cu_seqlens_q_ptr, seq_lens_k_ptr, block_table_ptr,
        q_token_stride, q_head_stride,
        k_block_stride, k_slot_stride, k_head_stride,
        v_block_stride, v_slot_stride, v_head_stride,
        o_token_stride, o_head_stride,
        block_table_stride, scale_log2,
        GROUP: tl.constexpr, PACK: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    TOKENS: tl.constexpr = BLOCK_M // PACK
    prog = tl.program_id(0)
    head_base = tl.program_id(1) * PACK
    kv_head = head_base // GROUP

    seq = tl.load(prog_seq_ptr + prog)
    tok0 = tl.load(prog_tok_ptr + prog)
    q_begin = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_begin
    num_keys = tl.load(seq_lens_k_ptr + seq)
    context = num_keys - q_len

    rows = tl.arange(0, BLOCK_M)
    tok = tok0 + rows // PACK
    head = head_base + rows % PACK
    row_valid = tok < q_len
    dims = tl.arange(0, HEAD_DIM)

    q_offs = (q_begin + tok)[:, None].to(tl.int64) * q_token_stride \
        + head[:, None] * q_head_stride + dims[None, :]
    q = tl.load(q_ptr + q_offs, mask=row_valid[:, None], other=0.0)

    # Bottom-right causal: token i sees keys 0 .. context + i; padding rows see nothing new.
    last_key = tl.where(row_valid, context + tok, -1)
    key_end = tl.minimum(num_keys, context + tl.minimum(tok0 + TOKENS, q_len))

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    table_row = block_table_ptr + seq.to(tl.int64) * block_table_stride
    keys = tl.arange(0, BLOCK_N)

    for start in range(0, key_end, BLOCK_N):
        key = start + keys
        key_valid = key < key_end
        block = tl.load(table_row + key // PAGE, mask=key_valid, other=0).to(tl.int64)
        slot = key % PAGE
        k_offs = (block * k_block_stride + slot * k_slot_stride + kv_head * k_head_stride)[None, :] \
            + dims[:, None]
        k = tl.load(k_ptr + k_offs, mask=key_valid[None, :], other=0.0)
        s = tl.dot(q, k) * scale_log2
        visible = (key[None, :] <= last_key[:, None]) & key_valid[None, :]
        s = tl.where(visible, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v_offs = (block * v_block_stride + slot * v_slot_stride + kv_head * v_head_stride)[:, None] \
            + dims[None, :]
        v = tl.load(v_ptr + v_offs, mask=key_valid[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    denom = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / denom[:, None]
    o_offs = (q_begin + tok)[:, None].to(tl.int64) * o_token_stride \
        + head[:, None] * o_head_stride + dims[None, :]
    tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=row_valid[:, None])


class PagedPrefill:
    """Launcher for one batch layout: builds the program tables once per tokens-per-program."""

    def __init__(self, q_lens, cu_seqlens_q, seq_lens_k, block_table, num_q_heads,
                 num_kv_heads, page_size, softmax_scale):
        self.q_lens = list(q_lens)
        self.cu_seqlens_q = cu_seqlens_q
        self.seq_lens_k = seq_lens_k
        self.block_table = block_table
        self.num_q_heads = num_q_heads
        self.num_kv_heads = num_kv_heads
        self.group = num_q_heads // num_kv_heads
        self.page_size = page_size
        self.scale_log2 = softmax_scale * LOG2E
        self._tables = {}

    def _program_table(self, tokens_per_program):
        if tokens_per_program not in self._tables:
            seqs, toks = [], []
            for seq, q_len in enumerate(self.q_lens):
                for tok in range(0, q_len, tokens_per_program):
                    seqs.append(seq)
                    toks.append(tok)
            device = self.cu_seqlens_q.device
            self._tables[tokens_per_program] = (
                torch.tensor(seqs, dtype=torch.int32, device=device),
                torch.tensor(toks, dtype=torch.int32, device=device))
        return self._tables[tokens_per_program]

    def supports(self, config):
        pack = self.group if config.pack_heads else 1
        return config.block_m % pack == 0 and config.block_m // pack >= 1

    def __call__(self, q, k_cache, v_cache, o, config):
        """o[token][head][d] = attention; q/o [tokens, Hq, D], caches [blocks, page, Hkv, D]."""
        pack = self.group if config.pack_heads else 1
        prog_seq, prog_tok = self._program_table(config.block_m // pack)
        grid = (prog_seq.numel(), self.num_q_heads // pack)
        _paged_prefill_kernel[grid](
            q, k_cache, v_cache, o,
            prog_seq, prog_tok, self.cu_seqlens_q, self.seq_lens_k, self.block_table,
            q.stride(0), q.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            o.stride(0), o.stride(1),
            self.block_table.stride(0), self.scale_log2,
            GROUP=self.group, PACK=pack, HEAD_DIM=q.shape[-1], PAGE=self.page_size,
            BLOCK_M=config.block_m, BLOCK_N=config.block_n,
            num_warps=config.num_warps, num_stages=config.num_stages)
