"""paged_problem.py - random paged attention problems for the Python tests and a naive float64
attention written independently of wideattn.reference (per-key indexing of the cache)."""

import math

import torch

HEAD_DIM = 512
GROUP = 8
BLOCK_SIZE = 16


class Problem:
    """A varlen batch over a shuffled paged cache. seqs: [(q_len, seq_len_k), ...]."""

    def __init__(self, seqs, kv_heads=2, block_size=BLOCK_SIZE, layout="plain", seed=0, spare_blocks=3):
        generator = torch.Generator().manual_seed(seed)
        self.seqs, self.kv_heads, self.q_heads, self.block_size = seqs, kv_heads, kv_heads * GROUP, block_size
        pages = [max(1, -(-length // block_size)) for _, length in seqs]
        self.num_blocks = sum(pages) + spare_blocks
        shape = (self.num_blocks, block_size, kv_heads, HEAD_DIM)
        if layout == "vllm":      # kv_cache[2, num_blocks, block_size, Hkv, D]
            self.kv_cache = torch.randn((2,) + shape, generator=generator).bfloat16()
            self.k_cache, self.v_cache = self.kv_cache[0], self.kv_cache[1]
        elif layout == "flashinfer":  # [num_blocks, 2, block_size, Hkv, D]
            self.kv_cache = torch.randn((self.num_blocks, 2) + shape[1:], generator=generator).bfloat16()
            self.k_cache, self.v_cache = self.kv_cache[:, 0], self.kv_cache[:, 1]
        else:
            self.k_cache = torch.randn(shape, generator=generator).bfloat16()
            self.v_cache = torch.randn(shape, generator=generator).bfloat16()
        order = torch.randperm(self.num_blocks, generator=generator).to(torch.int32)
        self.block_table = torch.full((len(seqs), max(pages)), self.num_blocks - 1, dtype=torch.int32)
        used = 0
        for s, count in enumerate(pages):
            self.block_table[s, :count] = order[used:used + count]
            used += count
        cu = [0]
        for q_len, _ in seqs:
            cu.append(cu[-1] + q_len)
        self.cu_seqlens_q = torch.tensor(cu, dtype=torch.int32)
        self.seq_lens_k = torch.tensor([length for _, length in seqs], dtype=torch.int32)
        self.q = torch.randn((cu[-1], self.q_heads, HEAD_DIM), generator=generator).bfloat16()
        self.scale = 1.0 / math.sqrt(HEAD_DIM)

    def keys(self, s, cache=None):
        """[seq_len_k, Hkv, D] float64 of sequence s, key by key through the block table."""
        cache = self.k_cache if cache is None else cache
        length = self.seqs[s][1]
        rows = [cache[int(self.block_table[s, j // self.block_size]), j % self.block_size] for j in range(length)]
        return torch.stack(rows).double() if rows else torch.zeros((0, self.kv_heads, HEAD_DIM), dtype=torch.float64)

    def values(self, s, cache=None):
        return self.keys(s, self.v_cache if cache is None else cache)

    def expected(self, k_dequant=None, v_dequant=None):
        """(out [total_q, Hq, D], lse [Hq, total_q]) in float64, causal bottom-right."""
        out = torch.zeros(self.q.shape, dtype=torch.float64)
        lse = torch.full((self.q_heads, self.q.shape[0]), -math.inf, dtype=torch.float64)
        for s, (q_len, length) in enumerate(self.seqs):
            begin = int(self.cu_seqlens_q[s])
            keys = self.keys(s, k_dequant)
            values = self.values(s, v_dequant)
            for i in range(q_len):
                visible = length - q_len + i + 1
                if visible <= 0:
                    continue
                query = self.q[begin + i].double()                          # [Hq, D]
                k_rep = keys[:visible].repeat_interleave(GROUP, dim=1)      # [visible, Hq, D]
                v_rep = values[:visible].repeat_interleave(GROUP, dim=1)
                scores = torch.einsum("hd,jhd->hj", query, k_rep) * self.scale
                lse[:, begin + i] = torch.logsumexp(scores, dim=-1)
                out[begin + i] = torch.einsum("hj,jhd->hd", torch.softmax(scores, dim=-1), v_rep)
        return out, lse


def dense_attention(query, key, value, allowed, scale):
    """Naive masked attention: query [B, Hq, T, D], key/value [B, Hkv, S, D], allowed [B, T, S]
    -> [B, T, Hq, D] float64 (rows with no allowed key: 0)."""
    group = query.shape[1] // key.shape[1]
    k = key.double().repeat_interleave(group, dim=1)
    v = value.double().repeat_interleave(group, dim=1)
    scores = torch.matmul(query.double(), k.transpose(2, 3)) * scale
    scores = scores.masked_fill(~allowed[:, None], -math.inf)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.matmul(weights, v).transpose(1, 2)


def assert_close_bf16(actual, expected, what, rel=1e-2):
    """bf16 outputs against a float64 reference: max error within rel x the reference's scale."""
    error = (actual.double() - expected).abs().max().item()
    bound = rel * max(expected.abs().max().item(), 1e-6)
    assert error <= bound, f"{what}: max abs error {error:.3e} > {bound:.3e}"


class PrefillOps:
    """Replaces the ops the Python entry points run (wideattn.ops._prefill_op, wideattn::prefill,
    and _prefill_packed_op, wideattn::prefill_packed) with `function`, which is called with
    wideattn::prefill's arguments whichever of the two the caller ran; a with block restores them."""

    def __init__(self, function):
        from wideattn import ops
        self.ops, self.function = ops, function

    def __enter__(self):
        ops, function = self.ops, self.function
        self.saved = ops._prefill_op, ops._prefill_packed_op
        ops._prefill_op = function
        ops._prefill_packed_op = lambda *args: function(*ops.packed_as_prefill_args(*args))
        return self

    def __exit__(self, *exc):
        self.ops._prefill_op, self.ops._prefill_packed_op = self.saved
