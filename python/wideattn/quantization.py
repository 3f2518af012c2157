"""The 8-bit functions on torch tensors: the per-tensor e4m3 scale of a bf16 tensor, quantising
K/V into a paged e4m3 cache through a slot mapping (a serving engine's "store K/V" step), and
quantising Q into a flat e4m3 tensor (fp8/quantize/NOTES.md); V also into the transposed e4m3
layout the FP8 P V kernels read (quantize_to_cache(..., v_transposed=True)). Scales stay on the
device, so the three calls chain without a host round trip and are capturable in a CUDA graph."""

import torch

from . import _capi
from . import _checks
from . import ops
from . import reference

SRC_SHAPE = "[tokens, heads, head_dim] of bfloat16"


def _source(check, src):
    check.tensor("src", src, 3, (torch.bfloat16,), SRC_SHAPE)
    check.int32_extent("src.shape[0] (tokens)", src.shape[0])
    return src


def _slot_mapping(check, slot_mapping, tokens):
    if slot_mapping is None:
        return None
    check.tensor("slot_mapping", slot_mapping, 1, (torch.int64,), "[tokens] of int64")
    check.dim("slot_mapping.shape[0]", slot_mapping.shape[0], tokens, "src.shape[0] (tokens)")
    return slot_mapping


def _counter(check, nonfinite_count):
    if nonfinite_count is None:
        return None
    check.tensor("nonfinite_count", nonfinite_count, nonfinite_count.dim() if isinstance(
        nonfinite_count, torch.Tensor) else 1, (torch.int32,), "of one int32 element")
    if nonfinite_count.numel() != 1:
        check.fail(f"nonfinite_count must hold one int32 element, got shape {tuple(nonfinite_count.shape)}")
    return nonfinite_count


def _scale_tensor(check, name, scale, allocate_on):
    if scale is None and allocate_on is not None:
        return torch.empty(1, dtype=torch.float32, device=allocate_on)
    check.tensor(name, scale, scale.dim() if isinstance(scale, torch.Tensor) else 1, (torch.float32,),
                 "of one float32 element")
    if scale.numel() != 1:
        check.fail(f"{name} must hold one float32 element, got shape {tuple(scale.shape)}")
    return scale


def compute_scale(src, slot_mapping=None, out=None, nonfinite_count=None, power_of_two=False):
    """max(amax / 448, 2^-126) over the finite values of src (tokens whose slot_mapping entry is
    negative are skipped), written into out (a float32 [1], allocated when None) and returned;
    with power_of_two=True rounded up to a power of two in the same launch
    (wideattn_compute_scale_pow2: power_of_two_scale's value, without its three tensor ops).
    NaN/inf inputs are left out and added to nonfinite_count (int32 [1]) when given."""
    check = _checks.Checker("wideattn.compute_scale")
    _source(check, src)
    slot_mapping = _slot_mapping(check, slot_mapping, src.shape[0])
    out = _scale_tensor(check, "out", out, src.device)
    nonfinite_count = _counter(check, nonfinite_count)
    if not isinstance(power_of_two, bool):
        check.fail(f"power_of_two={power_of_two!r} must be a bool")
    ops._scale_op(src, slot_mapping, out, nonfinite_count, power_of_two)
    return out


MAX_POWER_OF_TWO_SCALE = reference.MAX_POWER_OF_TWO_SCALE


def power_of_two_scale(scale):
    """The smallest power of two >= each element of `scale` (a float32 tensor of positive finite
    scales, e.g. compute_scale's, which are >= 2^-126), as a new tensor on the same device, by
    frexp / ldexp (exact; no host read); a scale above MAX_POWER_OF_TWO_SCALE (2^119) stays as it
    is (2^120 would decode the largest codes to infinity). The same values as
    wideattn_compute_scale_pow2 (C API 0.9.0) writes from the tensor itself. With such a v_scale the codes keep e4m3's relative
    precision (the largest value maps into [224, 448] instead of onto 448) and the K-from-V decode
    kernel rebuilds K with one bf16 product a pair of dims (decode_e4m3kfvb_d512,
    fp8/decode_e4m3kfvb_d512/NOTES.md)."""
    check = _checks.Checker("wideattn.power_of_two_scale")
    check.tensor("scale", scale, scale.dim() if isinstance(scale, torch.Tensor) else 1, (torch.float32,),
                 "of float32 scales")
    return reference.power_of_two_scale(scale)


TRANSPOSED_CACHE_SHAPE = "[num_blocks, heads, head_dim, block_size] of e4m3"


def transposed_v_layout(check, name, cache):
    """Checks with `check` (a _checks.Checker) the transposed e4m3 V cache `name`, `cache`
    [num_blocks, heads, head_dim, block_size] (each (block, head) page contiguous: head_dim rows
    of block_size codes, block_size a multiple of 16; include/wideattn.h
    WIDEATTN_FLAG_V_TRANSPOSED), and returns (block_size, block_stride, head_stride) in elements."""
    check.tensor(name, cache, 4, _checks.E4M3_DTYPES, TRANSPOSED_CACHE_SHAPE)
    num_blocks, heads, head_dim, block_size = cache.shape
    if block_size % reference.V_GROUP_SLOTS:
        check.fail(f"{name}.shape[3]={block_size} (block_size) must be a multiple of {reference.V_GROUP_SLOTS} "
                   "in the transposed V layout")
    if cache.stride(3) != 1 or cache.stride(2) != block_size:
        check.fail(f"{name} has strides {tuple(cache.stride())}: the transposed V layout needs each page row "
                   f"contiguous (stride(3) = 1, stride(2) = block_size = {block_size})")
    return block_size, cache.stride(0), cache.stride(1)


def quantize_to_cache(src, cache, slot_mapping, scale, nonfinite_count=None, v_transposed=False):
    """cache[slot // block_size][slot % block_size] = e4m3(src[token] / scale) for slot =
    slot_mapping[token] >= 0 (negative: padding, skipped). cache [num_blocks, block_size, heads,
    head_dim] e4m3 (uint8 or float8_e4m3fn; any strides with a contiguous head dim, e.g. vLLM's
    kv_cache[0]); src bf16 [tokens, heads, head_dim]; slot_mapping int64 [tokens]; scale: float32
    [1] on the device. NaN/inf inputs are stored as e4m3 NaN and added to nonfinite_count (int32
    [1]) when given. v_transposed=True writes a V cache in the transposed layout that the FP8 P V
    kernels read (wideattn.prefill(..., v_transposed=True)): cache [num_blocks, heads, head_dim,
    block_size], each page row contiguous, block_size a multiple of 16, slot s of a row at byte
    wideattn.reference.v_slot_position(s). Returns cache."""
    check = _checks.Checker("wideattn.quantize_to_cache")
    _source(check, src)
    if not isinstance(v_transposed, bool):
        check.fail(f"v_transposed must be a bool, got {type(v_transposed).__name__}")
    if v_transposed:
        block_size, block_stride, head_stride = transposed_v_layout(check, "cache", cache)
        check.dim("cache.shape[1]", cache.shape[1], src.shape[1], "src.shape[1] (heads)")
        check.dim("cache.shape[2]", cache.shape[2], src.shape[2], "src.shape[2] (head_dim)")
        layout = [cache.shape[0], block_size, block_stride, 1, head_stride, _capi.FLAG_V_TRANSPOSED]
    else:
        check.tensor("cache", cache, 4, _checks.E4M3_DTYPES, "[num_blocks, block_size, heads, head_dim] of e4m3")
        check.dim("cache.shape[2]", cache.shape[2], src.shape[1], "src.shape[1] (heads)")
        check.dim("cache.shape[3]", cache.shape[3], src.shape[2], "src.shape[2] (head_dim)")
        layout = [cache.shape[0], cache.shape[1]] + list(cache.stride()[:3])
    if slot_mapping is None:
        check.fail("slot_mapping is None; quantize() writes a flat destination")
    slot_mapping = _slot_mapping(check, slot_mapping, src.shape[0])
    scale = _scale_tensor(check, "scale", scale, None)
    nonfinite_count = _counter(check, nonfinite_count)
    ops._quantize_op(src, cache, slot_mapping, scale, layout, nonfinite_count)
    return cache


def quantize(src, scale, out=None, nonfinite_count=None):
    """e4m3 codes of src / scale into a flat [tokens, heads, head_dim] tensor (Q for the kernels
    that take Q in e4m3: pass it with q_scale = scale). out is allocated (float8_e4m3fn where torch
    has it, else uint8) when None. src bf16 [tokens, heads, head_dim]; scale float32 [1]; NaN/inf
    inputs are added to nonfinite_count (int32 [1]) when given. Returns out."""
    check = _checks.Checker("wideattn.quantize")
    _source(check, src)
    scale = _scale_tensor(check, "scale", scale, None)
    tokens, heads, head_dim = src.shape
    if out is None:
        out = torch.empty((tokens, heads, head_dim), dtype=ops.E4M3_DTYPE, device=src.device)
    check.tensor("out", out, 3, _checks.E4M3_DTYPES, "[tokens, heads, head_dim] of e4m3")
    if tuple(out.shape) != tuple(src.shape):
        check.fail(f"out has shape {tuple(out.shape)}, src has {tuple(src.shape)}")
    nonfinite_count = _counter(check, nonfinite_count)
    if tokens:
        # Flat destination (wideattn.h): block_size 1, one block per token.
        layout = [tokens, 1, out.stride(0), out.stride(0), out.stride(1)]
        ops._quantize_op(src, out, None, scale, layout, nonfinite_count)
    return out
