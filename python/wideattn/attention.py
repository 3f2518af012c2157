"""Attention calls on torch tensors, in the shapes serving engines use.

prefill() takes a paged KV cache ([num_blocks, block_size, num_kv_heads, head_dim], any strides with
a contiguous head dim: vLLM's per-layer K and V halves, FlashInfer's, transformers' paged cache
viewed as pages); decode is the same call with one (or a few) new tokens per sequence.
varlen_attention() takes K/V as dense rows per sequence ([total_k, num_kv_heads, head_dim] with
cu_seqlens_k, as flash_attn_varlen_func does) and describes them as token-row pages without a copy.
prefill_k_from_v() takes a V-only paged cache and K's description (K from V) and runs the
`wideattn::prefill_k_from_v` op (one query token per sequence), or rebuilds the keys into a bf16
K + V scratch (`wideattn::k_from_v_rebuild`) and runs `wideattn::prefill` over it (several),
checking every call; k_from_v_rebuild() is that rebuild into caches the caller owns;
k_from_v_cos_sin() builds the cos / sin table such a call may read.
Both check every argument, allocate what the caller did not pass with the caller's allocator
(torch.empty), and run the `wideattn::prefill` op. prefill() checks a call once per argument
signature (_prefill_signature: the shapes, strides, dtypes and devices of its tensors, its
scalars with their types): a call whose signature passed before builds the signature, looks it up
and calls the op with the values the checks derived then (the KV layouts, the softmax scale as a
float, the hints, the flags), allocating only the outputs it was not given: in eager mode a call
without lse and scales runs `wideattn::prefill_packed` (the same call with those values packed
into one int list kept with the signature: a smaller schema, less of torch's dispatcher; ops
module docstring), every other call `wideattn::prefill`; the op's CUDA
implementation reuses the plan of the same metadata (ops.PlanCache). A call with a scalar of
another type (a tensor as a hint) is checked every time. Debug mode (wideattn.set_debug(True),
$WIDEATTN_DEBUG=1) checks every call.
"""

import math

import torch

from . import _capi
from . import _checks
from . import errors
from . import ops
from .library import _debug, default_library
from .quantization import transposed_v_layout

Q_SHAPE = "[total_q, num_q_heads, head_dim]"
CACHE_SHAPE = "[num_blocks, block_size, num_kv_heads, head_dim]"
ROWS_SHAPE = "[total_k, num_kv_heads, head_dim]"


def _paged_layout(cache):
    """The KV layout (ops module docstring) of a paged cache [num_blocks, block_size, num_kv_heads,
    head_dim] as it is: offset 0 and its own strides."""
    return [0, cache.shape[0], cache.shape[1], cache.shape[2]] + list(cache.stride()[:3])


def _output(check, out, q):
    total_q, heads, head_dim = q.shape
    if out is None:
        return torch.empty((total_q, heads, head_dim), dtype=torch.bfloat16, device=q.device)
    check.tensor("out", out, 3, _checks.OUT_DTYPES, Q_SHAPE)
    if tuple(out.shape) != tuple(q.shape):
        check.fail(f"out has shape {tuple(out.shape)}, q has {tuple(q.shape)}")
    return out


def _lse(check, lse, out, total_q):
    """(lse tensor or None, whether to return it). lse=True allocates [num_q_heads, total_q]."""
    dtype = torch.float64 if out.dtype == torch.float64 else torch.float32
    if lse is None or lse is False:
        return None, False
    if lse is True:
        return torch.empty((out.shape[1], total_q), dtype=dtype, device=out.device), True
    check.tensor("lse", lse, 2, (dtype,), f"[num_q_heads, >= total_q] of {str(dtype).replace('torch.', '')}")
    if lse.shape[0] != out.shape[1] or lse.shape[1] < total_q:
        check.fail(f"lse has shape {tuple(lse.shape)}; expected [{out.shape[1]}, >= {total_q}]")
    return lse, True


def _metadata(check, cu_seqlens_q, seq_lens_k_name, seq_lens_k, block_table=None):
    """Checks cu_seqlens_q [num_seqs + 1], the per-sequence key tensor and the block table."""
    check.tensor("cu_seqlens_q", cu_seqlens_q, 1, (torch.int32,), "[num_seqs + 1] of int32")
    num_seqs = cu_seqlens_q.shape[0] - 1
    if num_seqs < 1:
        check.fail(f"cu_seqlens_q has {cu_seqlens_q.shape[0]} entries; expected num_seqs + 1 >= 2")
    check.tensor(seq_lens_k_name, seq_lens_k, 1, (torch.int32,), "of int32")
    if block_table is not None:
        check.dim(f"{seq_lens_k_name}.shape[0]", seq_lens_k.shape[0], num_seqs, "cu_seqlens_q.shape[0] - 1")
        check.tensor("block_table", block_table, 2, (torch.int32,), "[num_seqs, max_blocks_per_seq] of int32")
        check.dim("block_table.shape[0]", block_table.shape[0], num_seqs, "num_seqs")
    return num_seqs


def _scales(check, q, kv_dtype, q_scale, k_scale, v_scale):
    e4m3 = _checks.E4M3_DTYPES
    return (check.scale("q_scale", q_scale, q.dtype in e4m3, "q"),
            check.scale("k_scale", k_scale, kv_dtype in e4m3, "the K cache"),
            check.scale("v_scale", v_scale, kv_dtype in e4m3, "the V cache"))


def _kv_pair(check, k_name, k, v_name, v, ndim, shape_text, q):
    check.tensor(k_name, k, ndim, _checks.ATTENTION_IN_DTYPES, shape_text)
    check.tensor(v_name, v, ndim, _checks.ATTENTION_IN_DTYPES, shape_text)
    if v.dtype != k.dtype:
        check.fail(f"{v_name} has dtype {v.dtype} but {k_name} has {k.dtype}")
    check.dim(f"{k_name}.shape[{ndim - 1}]", k.shape[-1], q.shape[2], "q.shape[2] (head_dim)")
    if q.shape[1] % k.shape[-2]:
        check.fail(f"q.shape[1]={q.shape[1]} (num_q_heads) is not a multiple of "
                   f"{k_name}.shape[{ndim - 2}]={k.shape[-2]} (num_kv_heads)")
    if tuple(v.shape) != tuple(k.shape):
        check.fail(f"{v_name} has shape {tuple(v.shape)} but {k_name} has {tuple(k.shape)}")


def _transposed_v_pair(check, k_cache, v_cache, q):
    """Checks an e4m3 K cache in the engine layout and a V cache in the transposed layout
    (quantization.transposed_v_layout) of the same pages and heads; returns v's KV layout."""
    check.tensor("k_cache", k_cache, 4, _checks.E4M3_DTYPES, CACHE_SHAPE + " of e4m3 (v_transposed=True)")
    block_size, block_stride, head_stride = transposed_v_layout(check, "v_cache", v_cache)
    if v_cache.dtype != k_cache.dtype:
        check.fail(f"v_cache has dtype {v_cache.dtype} but k_cache has {k_cache.dtype}")
    check.dim("k_cache.shape[3]", k_cache.shape[3], q.shape[2], "q.shape[2] (head_dim)")
    num_blocks, page, heads, head_dim = k_cache.shape
    expected = (num_blocks, heads, head_dim, page)
    if tuple(v_cache.shape) != expected:
        check.fail(f"v_cache has shape {tuple(v_cache.shape)}; the transposed V cache of k_cache "
                   f"{tuple(k_cache.shape)} is {list(expected)} ([num_blocks, num_kv_heads, head_dim, block_size])")
    if q.shape[1] % heads:
        check.fail(f"q.shape[1]={q.shape[1]} (num_q_heads) is not a multiple of "
                   f"k_cache.shape[2]={heads} (num_kv_heads)")
    return [0, num_blocks, block_size, heads, block_stride, 1, head_stride]


def prefill(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, softmax_scale, out=None, lse=None,
            q_scale=None, k_scale=None, v_scale=None, max_seqlen_q=None, max_seqlen_k=None, num_splits=None,
            check_metadata=False, v_transposed=False):
    """Causal (bottom-right) attention of a varlen batch over a paged KV cache; returns out, or
    (out, lse) when lse is a tensor or True.

    q [total_q, num_q_heads, head_dim] bf16 (or e4m3 codes with q_scale); k_cache / v_cache
    [num_blocks, block_size, num_kv_heads, head_dim] bf16 or e4m3 (uint8 or float8_e4m3fn codes,
    with k_scale / v_scale: one float32 each, dequantised as code * scale); cu_seqlens_q
    [num_seqs + 1] int32; seq_lens_k [num_seqs] int32 (context + new tokens); block_table [num_seqs,
    max_blocks] int32; softmax_scale a positive finite float (Gemma 4: 1.0); out [total_q,
    num_q_heads, head_dim] bf16 (float64 selects the fp64 reference kernel; None allocates bf16);
    lse [num_q_heads, >= total_q] float32 (float64 with a float64 out; True allocates it, None skips
    it). max_seqlen_q / max_seqlen_k are host-int hints (the largest q_len and seq_lens_k of the
    batch; None unknown) that steer the split-KV count and never change the result's semantics;
    num_splits None or 0 lets the library choose, 1 never splits, 2 .. 128 forces that many
    (docs/design.md "Split-KV"). The device metadata is the caller's contract (docs/design.md
    section 2); everything else is checked here and by the library. check_metadata=True (debug runs)
    is the library's checked mode: the metadata is copied to the host and a bad entry raises
    InvalidArgumentError naming it instead of being clamped; the call then waits for the stream and
    cannot be captured in a CUDA graph. v_transposed=True: v_cache is an e4m3 V cache in the
    transposed layout [num_blocks, num_kv_heads, head_dim, block_size] (each page row contiguous,
    block_size a multiple of 16; written by wideattn.quantize_to_cache(..., v_transposed=True) or
    rearranged by wideattn.reference.transposed_v_cache), k_cache e4m3 in the engine layout with
    the same num_blocks, block_size and heads: only the FP8 P V kernels read it (sm_90a; docs/design.md
    "Transposed V").
    """
    if not _debug["on"]:
        # A call whose signature passed the checks before: the derived values kept then, the op.
        try:
            signature = _prefill_signature(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, out, lse, q_scale,
                                           k_scale, v_scale, softmax_scale, max_seqlen_q, max_seqlen_k, num_splits,
                                           check_metadata, v_transposed)
            derived = _checked_prefill.get(signature)
        except (AttributeError, TypeError):   # an argument of the wrong type: the checks name it
            signature = derived = None
        if derived is not None:
            k_layout, v_layout, scale, hints, splits, flags, lse_dtype, launch, config = derived
            if out is None:
                out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
            if lse is None or lse is False:
                if launch:
                    if config is not None and (ops._is_compiling is None or not ops._is_compiling()):
                        # No scales (config kept), eager: the op of the smaller schema (ops module docstring).
                        ops._prefill_packed_op(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, out, config,
                                               scale)
                    else:
                        ops._prefill_op(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, k_layout,
                                        v_layout, scale, q_scale, k_scale, v_scale, out, None, *hints, splits, flags)
                return out
            if lse is True:
                lse = torch.empty((q.shape[1], q.shape[0]), dtype=lse_dtype, device=q.device)
            if launch:
                ops._prefill_op(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, scale,
                                q_scale, k_scale, v_scale, out, lse, *hints, splits, flags)
            return out, lse
    else:
        signature = None
    check = _checks.Checker("wideattn.prefill")
    check.tensor("q", q, 3, _checks.ATTENTION_IN_DTYPES, Q_SHAPE)
    if not isinstance(v_transposed, bool):
        check.fail(f"v_transposed must be a bool, got {type(v_transposed).__name__}")
    if v_transposed:
        v_layout = _transposed_v_pair(check, k_cache, v_cache, q)
    else:
        _kv_pair(check, "k_cache", k_cache, "v_cache", v_cache, 4, CACHE_SHAPE, q)
        v_layout = _paged_layout(v_cache)
    _metadata(check, cu_seqlens_q, "seq_lens_k", seq_lens_k, block_table)
    scale = check.softmax_scale(softmax_scale)
    scales = _scales(check, q, k_cache.dtype, q_scale, k_scale, v_scale)
    hints = _hints(check, max_seqlen_q, max_seqlen_k)
    splits = check.num_splits(num_splits)
    flags = _flags(check, check_metadata) | (_capi.FLAG_V_TRANSPOSED if v_transposed else 0)
    check.int32_extent("k_cache.shape[0] (num_blocks)", k_cache.shape[0])
    out = _output(check, out, q)
    lse, return_lse = _lse(check, lse, out, q.shape[0])
    k_layout = _paged_layout(k_cache)
    if q.shape[0]:
        ops._prefill_op(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, scale,
                        *scales, out, lse, *hints, splits, flags)
    if signature is not None and _memoizable(lse, (softmax_scale, max_seqlen_q, max_seqlen_k, num_splits,
                                                   check_metadata, v_transposed)):
        if len(_checked_prefill) >= CHECKED_SIGNATURES:
            _checked_prefill.clear()
        lse_dtype = torch.float64 if out.dtype == torch.float64 else torch.float32
        # wideattn::prefill_packed's config for the calls of this signature without lse (None with scales).
        config = ops.pack_config(k_layout, v_layout, *hints, splits, flags) \
            if q_scale is None and k_scale is None and v_scale is None else None
        _checked_prefill[signature] = (k_layout, v_layout, scale, hints, splits, flags, lse_dtype, q.shape[0] > 0,
                                       config)
    return (out, lse) if return_lse else out


def prefill_k_from_v(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, softmax_scale, k_norm_scale, rotary_dims,
                     rope_theta=None, inv_freq=None, out=None, lse=None, v_scale=None, max_seqlen_q=None,
                     max_seqlen_k=None, num_splits=None, check_metadata=False, cos_sin=None):
    """prefill() over a V-only cache (K from V: Gemma 4's global layers, whose K is
    RoPE(k_norm(V)); docs/design.md section 2 "K from V in Gemma 4's global layers",
    docs/integration.md section 7): each key's K is rebuilt from its V row and its position (its
    index in the sequence). Returns out, or (out, lse).

    q [total_q, num_q_heads, head_dim] bf16; v_cache [num_blocks, block_size, num_kv_heads,
    head_dim] bf16 or e4m3 codes (with v_scale, one float32); k_norm_scale the layer's k_norm
    weight as float32 [head_dim] on q's device (the weight itself, not 1 + weight); rotary_dims the
    dims that rotate (even, 0 .. head_dim: 128 for Gemma 4's partial_rotary_factor 0.25 of 512);
    inv_freq the model's frequencies as float32 [rotary_dims / 2] on q's device (the first entries
    of transformers' rotary buffer: the same cos / sin bits as transformers), or None with
    rope_theta (a finite float > 0: 1e6 for Gemma 4) for 1 / fp32(theta ^ (2i / head_dim)).
    cos_sin a cos / sin table (C API 0.7.0) as bfloat16 [positions, rotary_dims // 2, 2] on q's
    device, contiguous, (cos, sin) of each position and frequency (k_from_v_cos_sin() fills one with
    the kernels' own values: the same outputs as without it), or None: a key at a position below
    cos_sin.shape[0] takes its cos / sin from the table as stored, the others from inv_freq or
    rope_theta; needs rotary_dims a multiple of 4. cu_seqlens_q, seq_lens_k, block_table,
    softmax_scale, out, lse, the hints max_seqlen_q and max_seqlen_k, num_splits and
    check_metadata as in prefill().

    How a call runs:
      - one query token per sequence (total_q <= num_seqs and max_seqlen_q None, 0 or 1), any
        call with a float64 out (the fp64 reference kernel), and any call while the default
        context has a kernel pinned (Context.set_prefill_kernel) that rebuilds K itself for these
        dtypes (decode_bf16kfv_d512 for a bf16 V cache, decode_e4m3kfvb_d512 or decode_e4m3kfv_d512 for e4m3: run one
        block per query token): the `wideattn::prefill_k_from_v` op, one wideattn_prefill with
        WIDEATTN_FLAG_K_FROM_V (the K-from-V decode kernels on the GPU). Where the library
        refuses it with UnsupportedError (no kernel of the device rebuilds K for it: the K-from-V
        decode kernels are sm_90a's; a float64 out or such a pin excepted, which raise), the call
        and later calls of its shape (device, V dtype, heads, head dim, page size) take the path
        below, which every device with a prefill kernel serves;
      - several query tokens in a sequence (a prompt, a chunk, a verify step), bf16 out: the keys
        are rebuilt once (k_from_v_rebuild, C API 0.8.0) into a dense bf16 K + V scratch of
        num_seqs x P pages (P = ceil(max_seqlen_k / block_size) when max_seqlen_k is given, else
        from seq_lens_k.max(), a read of the device that waits for the stream and cannot be
        captured in a CUDA graph; at most block_table.shape[1]; scratch page s * P + j holds page j
        of sequence s), then the ordinary K + V prefill (the `wideattn::prefill` op: whichever
        prefill kernel the device has, its plan cache) runs over it with the same cu_seqlens_q,
        seq_lens_k, softmax_scale, out, lse, hints, num_splits and check_metadata; a kernel pinned
        for bf16 calls restricts that prefill (a pinned decode_bf16kfv_d512 refuses it for an
        e4m3 V cache: it reads no K cache). The scratch (2 x num_seqs x P x block_size x
        num_kv_heads x head_dim bf16: 8 KiB a key for 4 KV heads of 512, 128 MiB for one sequence
        of 16384 keys) is allocated with torch.empty per call and freed after it. Here a given
        max_seqlen_k must be >= every seq_lens_k entry: the scratch rows address P x block_size
        keys, and a sequence with more is read clamped to them, as the kernels read a seq_lens_k
        past its block-table row (its last keys dropped; check_metadata=True refuses it, and so
        does the CPU implementation). The output matches the K-from-V kernels' within bf16
        rounding: the rebuilt K has their bits; an e4m3 V is read as bf16(code x v_scale).
    Every call is checked (no signature memo); the K-from-V op runs one-shot (no plan cache)."""
    check = _checks.Checker("wideattn.prefill_k_from_v")
    _v_only_cache_arguments(check, q, v_cache, cu_seqlens_q, seq_lens_k, block_table)
    scale = check.softmax_scale(softmax_scale)
    v_scale, rotary_dims, theta = _k_from_v_description(check, q, v_cache, v_scale, k_norm_scale, rotary_dims,
                                                        rope_theta, inv_freq, cos_sin)
    hints = _hints(check, max_seqlen_q, max_seqlen_k)
    splits = check.num_splits(num_splits)
    flags = _flags(check, check_metadata)
    check.int32_extent("v_cache.shape[0] (num_blocks)", v_cache.shape[0])
    out = _output(check, out, q)
    lse, return_lse = _lse(check, lse, out, q.shape[0])
    v_layout = _paged_layout(v_cache)
    if q.shape[0]:
        rebuild = (q, v_cache, cu_seqlens_q, seq_lens_k, block_table, v_layout, scale, v_scale, k_norm_scale, inv_freq,
                   theta, rotary_dims, out, lse, hints, splits, flags, cos_sin)
        fallback_key = _fallback_key(q, v_cache, block_table)
        if _through_rebuild(q, cu_seqlens_q, v_cache, out, hints[0]) or (
                fallback_key in _no_k_from_v_kernel and out.dtype != torch.float64
                and not _pinned_k_from_v_kernel(v_cache)):
            _k_from_v_over_rebuilt_keys(*rebuild)
        else:
            try:
                ops._k_from_v_op(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, v_layout, scale, v_scale,
                                 k_norm_scale, inv_freq, theta, rotary_dims, out, lse, *hints, splits, flags, cos_sin)
            except errors.UnsupportedError:
                # No kernel of the device rebuilds K for this call (the K-from-V decode kernels are
                # sm_90a's): the rebuild path serves it, and the calls of its shape after it.
                if out.dtype == torch.float64 or _pinned_k_from_v_kernel(v_cache):
                    raise
                _remember_fallback(fallback_key)
                _k_from_v_over_rebuilt_keys(*rebuild)
    return (out, lse) if return_lse else out


# The call shapes (_fallback_key) for which the library refused the K-from-V op with
# UnsupportedError: no kernel of the device rebuilds K for them, so prefill_k_from_v takes the
# rebuild path for them at once. Bounded: the oldest goes past FALLBACK_ENTRIES.
FALLBACK_ENTRIES = 64
_no_k_from_v_kernel = {}


def _fallback_key(q, v_cache, block_table):
    """What decides whether a kernel rebuilds K for a call of one query token per sequence: the
    device, V's dtype, the heads, head dim and page size."""
    return (str(q.device), v_cache.dtype, q.shape[1], v_cache.shape[2], q.shape[2], v_cache.shape[1])


def _remember_fallback(key):
    if len(_no_k_from_v_kernel) >= FALLBACK_ENTRIES:
        _no_k_from_v_kernel.pop(next(iter(_no_k_from_v_kernel)))
    _no_k_from_v_kernel[key] = True


def _v_only_cache_arguments(check, q, v_cache, cu_seqlens_q, seq_lens_k, block_table):
    """The checks of a K-from-V call's q (bf16), v_cache (of q's head_dim, heads dividing q's) and
    metadata, in prefill_k_from_v's order."""
    check.tensor("q", q, 3, (torch.bfloat16,), Q_SHAPE + " of bfloat16")
    check.tensor("v_cache", v_cache, 4, _checks.ATTENTION_IN_DTYPES, CACHE_SHAPE)
    check.dim("v_cache.shape[3]", v_cache.shape[3], q.shape[2], "q.shape[2] (head_dim)")
    if q.shape[1] % v_cache.shape[2]:
        check.fail(f"q.shape[1]={q.shape[1]} (num_q_heads) is not a multiple of "
                   f"v_cache.shape[2]={v_cache.shape[2]} (num_kv_heads)")
    _metadata(check, cu_seqlens_q, "seq_lens_k", seq_lens_k, block_table)


def _k_from_v_description(check, q, v_cache, v_scale, k_norm_scale, rotary_dims, rope_theta, inv_freq, cos_sin):
    """The checks of K's description (v_scale against v_cache's dtype, k_norm_scale, rotary_dims,
    the frequencies, the cos / sin table); returns (v_scale, rotary_dims, the rope_theta to pass)."""
    head_dim = q.shape[2]
    v_scale = check.scale("v_scale", v_scale, v_cache.dtype in _checks.E4M3_DTYPES, "the V cache")
    check.tensor("k_norm_scale", k_norm_scale, 1, (torch.float32,), "[head_dim] of float32")
    check.dim("k_norm_scale.shape[0]", k_norm_scale.shape[0], head_dim, "q.shape[2] (head_dim)")
    rotary_dims = check.count("rotary_dims", rotary_dims, maximum=head_dim)
    if rotary_dims % 2:
        check.fail(f"rotary_dims={rotary_dims} must be even (dims rotate in pairs)")
    theta = _frequencies(check, rope_theta, inv_freq, rotary_dims)
    if cos_sin is not None:
        _cos_sin_table(check, cos_sin, rotary_dims)
    return v_scale, rotary_dims, theta


# The manifest feature of the prefill kernels that rebuild K from V themselves.
K_FROM_V_FEATURE = "k_from_v"


def _pinned_k_from_v_kernel(v_cache):
    """Whether the default context has a prefill kernel pinned that rebuilds K from V itself for a
    bf16 Q and out over v_cache's dtype (the pin then restricts the K-from-V call to it)."""
    context = ops.default_context()
    name = context._prefill_only    # Context.prefill_kernel without its open check: a plain attribute
    if name is None:
        return False
    kv_dtype = "e4m3" if v_cache.dtype in _checks.E4M3_DTYPES else "bf16"
    return any(k.name == name and k.kind == "prefill" and K_FROM_V_FEATURE in k.features and k.q_dtype == "bf16"
               and k.kv_dtype == kv_dtype and k.o_dtype == "bf16" for k in context.kernels())


def _through_rebuild(q, cu_seqlens_q, v_cache, out, max_seqlen_q):
    """Whether prefill_k_from_v serves a call by rebuilding its keys into a K + V scratch (its
    docstring): several query tokens in a sequence (total_q > num_seqs or a max_seqlen_q hint
    above 1), a bf16 out, and no pinned kernel that rebuilds K itself."""
    several = q.shape[0] > cu_seqlens_q.shape[0] - 1 or max_seqlen_q > 1
    return several and out.dtype != torch.float64 and not _pinned_k_from_v_kernel(v_cache)


def _scratch_pages(max_seqlen_k, seq_lens_k, block_size, row_pages):
    """P, the scratch pages per sequence of prefill_k_from_v's rebuild path: enough for max_seqlen_k
    keys (the hint; 0: seq_lens_k.max(), read from the device), at most row_pages (the block
    table's width), at least 1."""
    keys = max_seqlen_k if max_seqlen_k else int(seq_lens_k.max().item())
    return max(1, min(-(-keys // block_size), row_pages))


# Identity tables of the rebuild path's scratch, by (device, num_seqs, pages): the same tensor for
# every layer and step of a shape, so the K + V prefill's plan cache (keyed by the table's pointer)
# keeps its plan. Bounded: the oldest goes past IDENTITY_TABLE_ENTRIES.
IDENTITY_TABLE_ENTRIES = 16
_identity_tables = {}


def _identity_table(num_seqs, pages, device):
    """The int32 [num_seqs, pages] table s * pages + j on `device`, cached (a table made while the
    stream captures a CUDA graph lives in the graph's pool and is not kept)."""
    key = (str(device), num_seqs, pages)
    table = _identity_tables.get(key)
    if table is not None:
        return table
    table = torch.arange(num_seqs * pages, dtype=torch.int32, device=device).view(num_seqs, pages)
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return table
    if len(_identity_tables) >= IDENTITY_TABLE_ENTRIES:
        _identity_tables.pop(next(iter(_identity_tables)))
    _identity_tables[key] = table
    return table


def _k_from_v_over_rebuilt_keys(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, v_layout, scale, v_scale,
                                k_norm_scale, inv_freq, theta, rotary_dims, out, lse, hints, splits, flags, cos_sin):
    """prefill_k_from_v's rebuild path (its docstring) on checked arguments: the keys rebuilt into a
    dense bf16 K + V scratch with an identity table, then the K + V prefill over it."""
    num_seqs = seq_lens_k.shape[0]
    _, block_size, num_kv_heads, head_dim = v_cache.shape
    pages = _scratch_pages(hints[1], seq_lens_k, block_size, block_table.shape[1])
    shape = (num_seqs * pages, block_size, num_kv_heads, head_dim)
    k_scratch = torch.empty(shape, dtype=torch.bfloat16, device=q.device)
    v_scratch = torch.empty(shape, dtype=torch.bfloat16, device=q.device)
    table = _identity_table(num_seqs, pages, q.device)
    ops._k_from_v_rebuild_op(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, k_norm_scale,
                             inv_freq, theta, rotary_dims, out, k_scratch, v_scratch, table, *hints, flags, cos_sin)
    layout = _paged_layout(k_scratch)
    ops._prefill_op(q, k_scratch, v_scratch, cu_seqlens_q, seq_lens_k, table, layout, layout, scale, None, None,
                    None, out, lse, *hints, splits, flags)


REBUILD_CACHE_SHAPE = CACHE_SHAPE + " of bfloat16"


def _rebuild_cache(check, name, cache, v_cache):
    """A bf16 output cache of k_from_v_rebuild: [num_blocks, block_size, num_kv_heads, head_dim]
    with v_cache's page size, heads and head dim, strides multiples of 8 elements and its data
    16-byte aligned (the library's rules for wideattn_k_from_v_rebuild_out)."""
    check.tensor(name, cache, 4, (torch.bfloat16,), REBUILD_CACHE_SHAPE)
    for dim, what in ((1, "block_size"), (2, "num_kv_heads"), (3, "head_dim")):
        check.dim(f"{name}.shape[{dim}]", cache.shape[dim], v_cache.shape[dim], f"v_cache.shape[{dim}] ({what})")
    if cache.shape[0] < 1:
        check.fail(f"{name}.shape[0] (num_blocks) is 0; expected >= 1")
    check.int32_extent(f"{name}.shape[0] (num_blocks)", cache.shape[0])
    if any(stride % REBUILD_STRIDE_MULTIPLE or stride < 1 for stride in cache.stride()[:3]):
        check.fail(f"{name} has strides {tuple(cache.stride())}: the first three must be positive multiples of "
                   f"{REBUILD_STRIDE_MULTIPLE} elements (rows 16-byte aligned)")
    if cache.data_ptr() % REBUILD_ALIGNMENT:
        check.fail(f"{name}'s data at {cache.data_ptr():#x} is not {REBUILD_ALIGNMENT}-byte aligned")


REBUILD_ALIGNMENT = 16               # bytes, of k_out / v_out (the library's tensor alignment)
REBUILD_STRIDE_MULTIPLE = 8          # elements: 16 bytes of bf16


def k_from_v_rebuild(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, k_norm_scale, rotary_dims, k_out, v_out,
                     out_block_table, rope_theta=None, inv_freq=None, v_scale=None, out=None, max_seqlen_q=None,
                     max_seqlen_k=None, check_metadata=False, cos_sin=None):
    """The keys of a K-from-V call (prefill_k_from_v's arguments) rebuilt into a bf16 K + V cache the
    caller owns (wideattn_k_from_v_rebuild, C API 0.8.0; the `wideattn::k_from_v_rebuild` op on the
    current stream): for every sequence s, key j < seq_lens_k[s] and KV head, k_out gets the K the
    K-from-V kernels compute (bf16, the same bits) and v_out the V as bf16 (a bf16 V cache: the
    same bits; e4m3: bf16(code x v_scale)), at page out_block_table[s][j // block_size], slot
    j % block_size. Nothing else of k_out / v_out is written. Afterwards prefill(q, k_out, v_out,
    cu_seqlens_q, seq_lens_k, out_block_table, softmax_scale, out=out, ...) is the K-from-V call's
    attention over the rebuilt keys, on any prefill kernel (how prefill_k_from_v serves calls with
    several query tokens per sequence); the scratch can serve every layer of a step in turn.

    q, v_cache, cu_seqlens_q, seq_lens_k, block_table, k_norm_scale, rotary_dims, rope_theta,
    inv_freq, v_scale, cos_sin, max_seqlen_q, max_seqlen_k and check_metadata as in
    prefill_k_from_v (the call whose keys are rebuilt: the library validates that whole call;
    q is not read). k_out, v_out: bf16 [num_blocks, block_size, num_kv_heads, head_dim] with
    v_cache's block_size, num_kv_heads and head_dim, strides multiples of 8 elements, on q's
    device, sharing no byte with each other or with the call's tensors; out_block_table: int32
    [num_seqs, width] on the device, entry [s][p] the page of k_out / v_out that takes page p of
    sequence s (its row stride is the one the library reads; a sequence's keys past width x
    block_size, or past block_table's row, are not rebuilt; a page outside 0 .. num_blocks - 1 of
    k_out is skipped). out: the output tensor of the attention that follows, as prefill takes it
    ([total_q, num_q_heads, head_dim] bf16; neither read nor written here: the library validates
    the call with it), or None to allocate one (bf16, torch.empty). check_metadata: the library's
    checked mode over the call's metadata and out_block_table (a bad entry of the latter is
    named after "out: "). Returns out (the tensor given or allocated), for that prefill call.
    With no query rows (total_q 0) nothing is rebuilt."""
    check = _checks.Checker("wideattn.k_from_v_rebuild")
    _v_only_cache_arguments(check, q, v_cache, cu_seqlens_q, seq_lens_k, block_table)
    v_scale, rotary_dims, theta = _k_from_v_description(check, q, v_cache, v_scale, k_norm_scale, rotary_dims,
                                                        rope_theta, inv_freq, cos_sin)
    _rebuild_cache(check, "k_out", k_out, v_cache)
    _rebuild_cache(check, "v_out", v_out, v_cache)
    if tuple(v_out.shape) != tuple(k_out.shape):
        check.fail(f"v_out has shape {tuple(v_out.shape)} but k_out has {tuple(k_out.shape)}")
    check.tensor("out_block_table", out_block_table, 2, (torch.int32,), "[num_seqs, width] of int32")
    check.dim("out_block_table.shape[0]", out_block_table.shape[0], seq_lens_k.shape[0], "num_seqs")
    if out_block_table.shape[1] < 1:
        check.fail("out_block_table has no column; expected [num_seqs, width >= 1]")
    hints = _hints(check, max_seqlen_q, max_seqlen_k)
    flags = _flags(check, check_metadata)
    check.int32_extent("v_cache.shape[0] (num_blocks)", v_cache.shape[0])
    out = _output(check, out, q)
    if q.shape[0]:
        ops._k_from_v_rebuild_op(q, v_cache, cu_seqlens_q, seq_lens_k, block_table, _paged_layout(v_cache), v_scale,
                                 k_norm_scale, inv_freq, theta, rotary_dims, out, k_out, v_out, out_block_table,
                                 *hints, flags, cos_sin)
    return out


def _frequencies(check, rope_theta, inv_freq, rotary_dims):
    """The rope_theta of a K-from-V description as a float: the caller's (a finite float > 0) when
    inv_freq is None, else 0.0 (not read with a frequency table: include/wideattn.h) after checking
    inv_freq as float32 [rotary_dims / 2]."""
    if inv_freq is not None:
        check.tensor("inv_freq", inv_freq, 1, (torch.float32,), "[rotary_dims / 2] of float32")
        check.dim("inv_freq.shape[0]", inv_freq.shape[0], rotary_dims // 2, "rotary_dims / 2")
        return 0.0
    if isinstance(rope_theta, bool) or not isinstance(rope_theta, (int, float)):
        check.fail(f"rope_theta must be a float when inv_freq is None, got {type(rope_theta).__name__}")
    if not math.isfinite(rope_theta) or rope_theta <= 0:
        check.fail(f"rope_theta={rope_theta} must be finite and > 0")
    return float(rope_theta)


COS_SIN_SHAPE = "[positions, rotary_dims // 2, 2] of bfloat16"


def _cos_sin_table(check, cos_sin, rotary_dims):
    """prefill_k_from_v's cos_sin: bfloat16 [positions, rotary_dims // 2, 2] on the call's device,
    contiguous and 8-byte aligned (the library's rows), 1 .. 2^31 - 1 positions, rotary_dims a
    positive multiple of 4."""
    check.tensor("cos_sin", cos_sin, 3, (torch.bfloat16,), COS_SIN_SHAPE)
    multiple = _capi.COS_SIN_ROTARY_DIMS_MULTIPLE
    if rotary_dims < multiple or rotary_dims % multiple:
        check.fail(f"rotary_dims={rotary_dims} must be a positive multiple of {multiple} with a cos_sin table "
                   f"(its rows hold whole 8-byte pairs of frequencies)")
    check.dim("cos_sin.shape[1]", cos_sin.shape[1], rotary_dims // 2, "rotary_dims / 2")
    check.dim("cos_sin.shape[2]", cos_sin.shape[2], 2, "(cos, sin)")
    if not 1 <= cos_sin.shape[0] <= _checks.INT32_MAX:
        check.fail(f"cos_sin.shape[0]={cos_sin.shape[0]} (positions) is outside 1 .. {_checks.INT32_MAX}")
    if not cos_sin.is_contiguous():
        check.fail(f"cos_sin must be contiguous, got strides {tuple(cos_sin.stride())}")
    if cos_sin.data_ptr() % _capi.COS_SIN_ALIGNMENT:
        check.fail(f"cos_sin's data at {cos_sin.data_ptr():#x} is not {_capi.COS_SIN_ALIGNMENT}-byte aligned")


def k_from_v_cos_sin(rotary_dims, positions, rope_theta=None, inv_freq=None, head_dim=512, device=None):
    """The cos / sin table of a K-from-V description (wideattn_k_from_v.cos_sin, C API 0.7.0;
    prefill_k_from_v's cos_sin) for positions 0 .. positions - 1: bfloat16 [positions,
    rotary_dims // 2, 2], entry [j, i] the (cos, sin) of the fp32 angle j * f[i], filled on the
    host by wideattn_k_from_v_cos_sin with the values the K-from-V decode kernels compute
    themselves, so a call given this table and the same inv_freq or rope_theta returns the outputs
    of the call without it. rotary_dims: the dims that rotate (a multiple of 4 in 4 .. head_dim:
    128 for Gemma 4); positions: the rows (1 .. 2^31 - 1: the longest sequence the table serves);
    rope_theta: a finite float > 0 (1e6 for Gemma 4) for f[i] = 1 / fp32(theta ^ (2i / head_dim))
    when inv_freq is None (not read otherwise); inv_freq: the model's frequencies as float32
    [rotary_dims / 2] on any device (copied to the host), or None; head_dim: the head dim of the
    formula's exponent (even, > 0; 512 for Gemma 4's global layers); device: where the table is
    returned (None: the CPU; the call's device, e.g. "cuda", for prefill_k_from_v). 256 bytes a
    position for Gemma 4 (64 MiB for 262144 positions), one table for every layer and head that
    shares the frequencies."""
    check = _checks.Checker("wideattn.k_from_v_cos_sin")
    head_dim = check.count("head_dim", head_dim, minimum=2)
    if head_dim % 2:
        check.fail(f"head_dim={head_dim} must be even")
    rotary_dims = check.count("rotary_dims", rotary_dims, minimum=_capi.COS_SIN_ROTARY_DIMS_MULTIPLE,
                              maximum=head_dim)
    if rotary_dims % _capi.COS_SIN_ROTARY_DIMS_MULTIPLE:
        check.fail(f"rotary_dims={rotary_dims} must be a multiple of {_capi.COS_SIN_ROTARY_DIMS_MULTIPLE} (the "
                   f"table's rows hold whole 8-byte pairs of frequencies)")
    positions = check.count("positions", positions, minimum=1)
    theta = _frequencies(check, rope_theta, inv_freq, rotary_dims)
    frequencies = inv_freq.detach().to("cpu").contiguous() if inv_freq is not None else None
    table = torch.empty((positions, rotary_dims // 2, 2), dtype=torch.bfloat16)
    default_library().k_from_v_cos_sin(theta, frequencies.data_ptr() if frequencies is not None else None, head_dim,
                                       rotary_dims, positions, table.data_ptr(),
                                       table.numel() * table.element_size())
    return table if device is None else table.to(device)


# prefill() calls whose arguments passed the checks, by signature (_prefill_signature), each with
# what the checks derived from them (debug mode: none kept).
CHECKED_SIGNATURES = 4096
_checked_prefill = {}
_SCALAR_TYPES = (type(None), bool, int, float)


def _prefill_signature(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, out, lse, q_scale, k_scale, v_scale,
                       softmax_scale, max_seqlen_q, max_seqlen_k, num_splits, check_metadata, v_transposed=False):
    """What prefill()'s checks and the values they derive depend on, as one flat tuple: the types of
    the scalars first (so that a lookup compares a probe whose scalar is of another type, e.g. a
    tensor hint, with no stored value), then each tensor's shape, strides, dtype and device (None
    for a tensor not passed), lse as given (None, True, False, or its tensor's), the scalars'
    values. Raises AttributeError or TypeError for an argument that is not of these kinds (the
    checks then word the refusal); a signature with a scalar of another type is computed but never
    stored (_memoizable)."""
    return (type(softmax_scale), type(max_seqlen_q), type(max_seqlen_k), type(num_splits), type(check_metadata),
            type(v_transposed),
            q.shape, q.stride(), q.dtype, q.device,
            k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.device,
            v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.device,
            cu_seqlens_q.shape, cu_seqlens_q.stride(), cu_seqlens_q.dtype, cu_seqlens_q.device,
            seq_lens_k.shape, seq_lens_k.stride(), seq_lens_k.dtype, seq_lens_k.device,
            block_table.shape, block_table.stride(), block_table.dtype, block_table.device,
            None if out is None else (out.shape, out.stride(), out.dtype, out.device),
            lse if lse is None or lse is True or lse is False else (lse.shape, lse.stride(), lse.dtype, lse.device),
            None if q_scale is None else (q_scale.shape, q_scale.stride(), q_scale.dtype, q_scale.device),
            None if k_scale is None else (k_scale.shape, k_scale.stride(), k_scale.dtype, k_scale.device),
            None if v_scale is None else (v_scale.shape, v_scale.stride(), v_scale.dtype, v_scale.device),
            softmax_scale, max_seqlen_q, max_seqlen_k, num_splits, check_metadata, v_transposed)


def _memoizable(lse, scalars):
    """Whether a checked call's signature may be kept: lse a tensor or None / True / False and every
    scalar of a plain type (a tensor hint is read by the checks, so its calls are always checked)."""
    return (lse is None or isinstance(lse, (bool, torch.Tensor))) and all(type(s) in _SCALAR_TYPES for s in scalars)


def _flags(check, check_metadata):
    """wideattn_prefill_params.flags of the check_metadata keyword (a bool)."""
    if not isinstance(check_metadata, bool):
        check.fail(f"check_metadata must be a bool, got {type(check_metadata).__name__}")
    return _capi.FLAG_CHECK_METADATA if check_metadata else 0


def _hints(check, max_seqlen_q, max_seqlen_k):
    """(max_seqlen_q, max_seqlen_k) as the C API takes them: host ints, 0 for unknown (None)."""
    q_hint = check.count("max_seqlen_q", max_seqlen_q, optional=True)
    k_hint = check.count("max_seqlen_k", max_seqlen_k, optional=True)
    return (q_hint or 0, k_hint or 0)


def token_row_layout(base, row_stride, head_stride, num_rows, num_kv_heads):
    """The KV layout of rows base[r] (r < num_rows, each [num_kv_heads, head_dim]; row_stride and
    head_stride in elements) as pages of TOKEN_ROW_PAGE consecutive rows that start at any row:
    block b is row b (block stride = slot stride = row stride). Kernels that read K/V with TMA
    cannot use it; selection then takes the cp.async kernel of the same dtypes."""
    return [0, max(num_rows, 1), ops.TOKEN_ROW_PAGE, num_kv_heads, row_stride, row_stride, head_stride]


def token_row_block_table(row_start, max_seqlen_k, num_rows):
    """block_table[s][p] = row_start[s] + 16 p: sequence s's keys are rows row_start[s] + j; pages
    enough for max_seqlen_k keys, entries clamped below num_rows (the rows of K/V)."""
    pages = max(1, -(-max_seqlen_k // ops.TOKEN_ROW_PAGE))
    steps = torch.arange(pages, device=row_start.device, dtype=torch.int32) * ops.TOKEN_ROW_PAGE
    table = row_start.to(torch.int32)[:, None] + steps[None, :]
    return table.clamp_(max=max(num_rows - 1, 0))


def rows_prefill(q, k, v, k_rows, v_rows, cu_seqlens_q, row_start, seq_lens_k, max_seqlen_k, softmax_scale,
                 out, lse=None, scales=(None, None, None), max_seqlen_q=0, num_splits=0, flags=0, block_table=None):
    """The op on token-row layouts (k_rows / v_rows from token_row_layout, over the tensors k / v;
    q as in prefill); no checks. Sequence s has the queries cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1
    and seq_lens_k[s] keys from row row_start[s] of k / v; max_seqlen_k (host int) bounds every
    sequence's keys and is passed on as the hint, max_seqlen_q likewise (0 unknown).
    softmax_scale, out, lse (or None), scales (q_scale, k_scale, v_scale), num_splits and flags
    are the op's arguments as prefill passes them; block_table, when given, is
    token_row_block_table(row_start, max_seqlen_k, k_rows[1]) made before (shared by calls over
    rows of the same layout). Returns out."""
    if block_table is None:
        block_table = token_row_block_table(row_start, max_seqlen_k, k_rows[1])
    ops._prefill_op(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_rows, v_rows, softmax_scale, *scales, out, lse,
                    max_seqlen_q, max_seqlen_k, num_splits, flags)
    return out


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, out=None,
                     lse=None, q_scale=None, k_scale=None, v_scale=None, num_splits=None, check_metadata=False):
    """flash_attn_varlen_func-style causal (bottom-right) attention: sequence s owns the rows
    cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 of q [total_q, num_q_heads, head_dim] and key rows
    cu_seqlens_k[s] .. cu_seqlens_k[s+1]-1 of k / v [total_k, num_kv_heads, head_dim] (its
    context followed by its new tokens).
    max_seqlen_k (host int) bounds every sequence's keys; max_seqlen_q (host int or None) is a
    hint; both steer the split-KV count, as num_splits does (see prefill); softmax_scale, out,
    lse, q_scale, k_scale and v_scale as in prefill; check_metadata as in prefill (the rows' block
    table is built here, so it checks cu_seqlens_q and the key counts against max_seqlen_k).
    Returns out, or (out, lse)."""
    check = _checks.Checker("wideattn.varlen_attention")
    check.tensor("q", q, 3, _checks.ATTENTION_IN_DTYPES, Q_SHAPE)
    _kv_pair(check, "k", k, "v", v, 3, ROWS_SHAPE, q)
    num_seqs = _metadata(check, cu_seqlens_q, "cu_seqlens_k", cu_seqlens_k)
    check.dim("cu_seqlens_k.shape[0]", cu_seqlens_k.shape[0], num_seqs + 1, "cu_seqlens_q.shape[0]")
    max_seqlen_q = check.count("max_seqlen_q", max_seqlen_q, optional=True) or 0
    max_seqlen_k = check.count("max_seqlen_k", max_seqlen_k)
    splits = check.num_splits(num_splits)
    flags = _flags(check, check_metadata)
    scale = check.softmax_scale(softmax_scale)
    scales = _scales(check, q, k.dtype, q_scale, k_scale, v_scale)
    check.int32_extent("k.shape[0] (total_k)", k.shape[0])
    out = _output(check, out, q)
    lse, return_lse = _lse(check, lse, out, q.shape[0])
    if q.shape[0]:
        k_rows = token_row_layout(k, k.stride(0), k.stride(1), k.shape[0], k.shape[1])
        v_rows = token_row_layout(v, v.stride(0), v.stride(1), v.shape[0], v.shape[1])
        seq_lens_k = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int32)
        rows_prefill(q, k, v, k_rows, v_rows, cu_seqlens_q, cu_seqlens_k[:-1], seq_lens_k, max_seqlen_k, scale,
                     out, lse, scales, max_seqlen_q, splits, flags)
    return (out, lse) if return_lse else out
