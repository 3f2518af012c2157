"""A minimal serving-engine attention backend on the wideattn ops, in vLLM's conventions
(docs/integration.md walks through it): one layer's KV cache `kv_cache[2, num_blocks, block_size,
num_kv_heads, head_dim]` (K half, V half), and per step the metadata vLLM's attention backends
receive (query_start_loc, seq_lens, block_table, slot_mapping, max_query_len, max_seq_len).
store() writes the step's new K/V through slot_mapping (bf16: a copy; e4m3: the
quantise-into-cache kernel with per-tensor scales on the device; with v_transposed, V's half of the
same tensor viewed as the transposed e4m3 V layout that the FP8 P V kernels read), attend() runs prefill and
decode tokens of the step in one wideattn.prefill call, forward() does both. vLLM's
FlashAttention backend splits them the same way (forward_includes_kv_cache_update = False:
do_kv_cache_update stores, forward attends). It is the sketch of an engine backend, tested on
the CPU through the ops' reference implementation; no engine is part of this repository.
"""

import dataclasses

import torch

from . import attention as _attention
from . import errors as _errors
from . import quantization as _quantization
from .library import default_context

_CALL = "wideattn.serving.WideattnBackend"
_KV_DTYPES = ("bf16", "e4m3")  # kv_cache_dtype values, named as the kernels' kv_dtype


@dataclasses.dataclass
class AttentionMetadata:
    """One step's batch, as vLLM's FlashAttention backend metadata names it."""

    query_start_loc: torch.Tensor   # int32 [num_seqs + 1]: cu_seqlens_q
    seq_lens: torch.Tensor          # int32 [num_seqs]: context + new tokens (seq_lens_k)
    block_table: torch.Tensor       # int32 [num_seqs, max_blocks]
    slot_mapping: torch.Tensor      # int64 [num_tokens]: block * block_size + offset of each new token
    max_query_len: int
    max_seq_len: int


def _span(low, high, step=None):
    """A kernel's head-dim or group range as text: "512", "32..512/32", "1..8"."""
    if low == high:
        return str(low)
    return f"{low}..{high}" + (f"/{step}" if step else "")


def _check_shape(num_q_heads, num_kv_heads, head_dim, kv_cache_dtype):
    """Refuses heads that do not form whole GQA groups, and a head_dim or group that no bf16-output
    prefill kernel of the bundle for a bf16 query and the cache's dtype takes."""
    for name, value in (("num_q_heads", num_q_heads), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise _errors.invalid_argument(_CALL, f"{name}={value!r} is not a positive integer")
    if num_q_heads % num_kv_heads:
        raise _errors.invalid_argument(
            _CALL, f"num_q_heads={num_q_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dtypes = ("bf16", kv_cache_dtype, "bf16")  # q / kv / o
    kernels = [k for k in default_context().kernels()
               if k.kind == "prefill" and (k.q_dtype, k.kv_dtype, k.o_dtype) == dtypes]
    what = f"the bundle's prefill kernels for a {kv_cache_dtype} cache"
    fitting = [k for k in kernels
               if k.head_dim[0] <= head_dim <= k.head_dim[1] and (head_dim - k.head_dim[0]) % k.head_dim[2] == 0]
    if not fitting:
        served = sorted({_span(*k.head_dim) for k in kernels})
        raise _errors.invalid_argument(
            _CALL, f"head_dim={head_dim}: {what} take head_dim {', '.join(served) or '(none)'}")
    group = num_q_heads // num_kv_heads
    if not any(k.group[0] <= group <= k.group[1] for k in fitting):
        served = sorted({_span(*k.group) for k in fitting})
        raise _errors.invalid_argument(
            _CALL, f"num_q_heads={num_q_heads} / num_kv_heads={num_kv_heads} = group {group}: {what} with "
                   f"head_dim {head_dim} take group {', '.join(served)}")


class WideattnBackend:
    """Attention of one layer wideattn serves (e.g. a Gemma 4 global layer) with num_q_heads query
    and num_kv_heads KV heads of head_dim, scores scaled by softmax_scale.

    kv_cache_dtype "bf16" keeps the cache in bf16; "e4m3" stores codes (float8_e4m3fn or uint8)
    with k_scale / v_scale (float32 [1] device tensors, e.g. from wideattn.compute_scale of a
    calibration batch) and runs the 8-bit kernel. v_transposed=True (e4m3 only) keeps the same
    kv_cache tensor but stores and reads its V half in the transposed layout (each block's
    [block_size, num_kv_heads, head_dim] bytes viewed as [num_kv_heads, head_dim, block_size]:
    the V half must be contiguous per block, block_size a multiple of 16), which the FP8 P V
    kernels read (sm_90a; docs/integration.md). num_splits forces the split-KV count of every
    call (1 never splits; None lets the library choose from the step's max_query_len / max_seq_len).

    The constructor checks kv_cache_dtype, and the heads and head_dim against the bundle's prefill
    kernels for the cache dtype (Context.kernels(), no GPU needed): InvalidArgumentError (a
    ValueError) names the argument, its value and what is accepted."""

    def __init__(self, num_q_heads, num_kv_heads, head_dim, softmax_scale, kv_cache_dtype="bf16", num_splits=None,
                 v_transposed=False):
        if kv_cache_dtype not in _KV_DTYPES:
            raise _errors.invalid_argument(_CALL, f"kv_cache_dtype={kv_cache_dtype!r}: expected 'bf16' or 'e4m3'")
        _check_shape(num_q_heads, num_kv_heads, head_dim, kv_cache_dtype)
        if not isinstance(v_transposed, bool):
            raise _errors.invalid_argument(_CALL, f"v_transposed={v_transposed!r} is not a bool")
        if v_transposed and kv_cache_dtype != "e4m3":
            raise _errors.invalid_argument(_CALL, f"v_transposed=True needs kv_cache_dtype='e4m3', not "
                                                  f"{kv_cache_dtype!r} (the transposed V layout holds e4m3 codes)")
        if v_transposed and not any(k.kind == "prefill" and "v_transposed" in k.features and k.q_dtype == "bf16"
                                    for k in default_context().kernels()):
            raise _errors.invalid_argument(_CALL, "v_transposed=True: the bundle has no kernel for bf16 Q that "
                                                  "reads the transposed V layout (they are built for sm_90a)")
        self.v_transposed = v_transposed   # V's half of the cache viewed as the transposed layout
        self.num_splits = num_splits   # split-KV count of every call (None: the library chooses)
        self.num_q_heads, self.num_kv_heads, self.head_dim = num_q_heads, num_kv_heads, head_dim
        self.softmax_scale = softmax_scale
        self.kv_cache_dtype = kv_cache_dtype

    def store(self, key, value, kv_cache, slot_mapping, k_scale=None, v_scale=None):
        """Writes the step's new key / value [num_tokens, num_kv_heads, head_dim] into kv_cache
        at slot_mapping (int64 per token); e4m3 caches quantise with k_scale / v_scale."""
        if self.kv_cache_dtype == "e4m3":
            _quantization.quantize_to_cache(key, kv_cache[0], slot_mapping, k_scale)
            _quantization.quantize_to_cache(value, self._v_cache(kv_cache), slot_mapping, v_scale,
                                            v_transposed=self.v_transposed)
            return
        # bf16: every slot must be >= 0 here (an engine's own store kernel skips padding slots).
        for half, states in ((kv_cache[0], key), (kv_cache[1], value)):
            half.view(-1, self.num_kv_heads, self.head_dim).index_copy_(0, slot_mapping, states)

    def forward(self, query, key, value, kv_cache, metadata, output=None, k_scale=None, v_scale=None):
        """store() then attend(): query [num_tokens, Hq * D] or [num_tokens, Hq, D]; key/value
        [num_tokens, Hkv(, D)], stored into kv_cache first; metadata an AttentionMetadata; k_scale /
        v_scale the e4m3 cache's scales. Returns output [num_tokens, Hq, D] (written into `output`
        when given)."""
        key = key.view(-1, self.num_kv_heads, self.head_dim)
        value = value.view(-1, self.num_kv_heads, self.head_dim)
        self.store(key, value, kv_cache, metadata.slot_mapping, k_scale, v_scale)
        return self.attend(query, kv_cache, metadata, output, k_scale, v_scale)

    def attend(self, query, kv_cache, metadata, output=None, k_scale=None, v_scale=None):
        """Attention of the step's queries over the cache (the step's K/V stored already): query as
        in forward(), kv_cache and metadata as in store(), output / k_scale / v_scale as in forward()."""
        query = query.view(-1, self.num_q_heads, self.head_dim)
        e4m3 = self.kv_cache_dtype == "e4m3"
        return _attention.prefill(query, kv_cache[0], self._v_cache(kv_cache), metadata.query_start_loc,
                                  metadata.seq_lens, metadata.block_table, self.softmax_scale, out=output,
                                  k_scale=k_scale if e4m3 else None, v_scale=v_scale if e4m3 else None,
                                  max_seqlen_q=metadata.max_query_len, max_seqlen_k=metadata.max_seq_len,
                                  num_splits=self.num_splits, v_transposed=self.v_transposed)

    def _v_cache(self, kv_cache):
        """V's half of kv_cache: kv_cache[1], or with v_transposed its blocks viewed as the
        transposed layout [num_blocks, num_kv_heads, head_dim, block_size] (the same bytes)."""
        v_half = kv_cache[1]
        if not self.v_transposed:
            return v_half
        num_blocks, block_size, heads, head_dim = v_half.shape
        if v_half[0].numel() and not v_half[0].is_contiguous():
            raise _errors.invalid_argument(_CALL, f"kv_cache[1] has strides {tuple(v_half.stride())}: with "
                                                  "v_transposed each block of the V half must be contiguous")
        return torch.as_strided(v_half, (num_blocks, heads, head_dim, block_size),
                                (v_half.stride(0), head_dim * block_size, block_size, 1))
