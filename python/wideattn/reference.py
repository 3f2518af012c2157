"""PyTorch reference of what the kernels compute (docs/design.md section 2), on any device: the
attention of one call addressed exactly as the kernels address it (block table, pages, strides
relative to a base tensor), the e4m3 codec, and the scale and quantise steps of
fp8/quantize/NOTES.md. The ops' CPU implementations run these; tests compare the kernels with
them. Exact math (float64 by default), not an emulation of a kernel's rounding.
"""

import math

import torch

E4M3_MAX = 448.0
E4M3_MAX_CODE = 0x7E
E4M3_NAN_CODE = 0x7F
E4M3_SIGN = 0x80
E4M3_MIN_SCALE = 2.0 ** -126
E4M3_MANTISSA_BITS = 3
E4M3_EXPONENT_BIAS = 7
E4M3_SUBNORMAL_STEP = 2.0 ** -9

CHECKED_MODE = "checked mode"  # the note ending each of checked mode's messages

# KV layout: [offset, num_blocks, block_size, num_kv_heads, block_stride, slot_stride, head_stride],
# in elements, relative to the base tensor's data pointer (ops.py builds these).
LAYOUT_FIELDS = ("offset", "num_blocks", "block_size", "num_kv_heads", "block_stride", "slot_stride",
                 "head_stride")

# The transposed e4m3 V layout (include/wideattn.h WIDEATTN_FLAG_V_TRANSPOSED,
# kernels/common/v_transposed.h): page (block, kv_head) holds head_dim rows of block_size codes,
# V(block, slot, head, d) at block * block_stride + head * head_stride + d * block_size +
# v_slot_position(slot); the slots of each group of V_GROUP_SLOTS are interleaved.
V_GROUP_SLOTS = 16
V_QUAD_SLOTS = 8
V_PAIR_SLOTS = 2
V_LANE_BYTES = 4


def e4m3_value(code):
    """The float value of one e4m3 byte `code` (an int 0..255; NaN for 0x7F / 0xFF)."""
    sign = -1.0 if code & E4M3_SIGN else 1.0
    exponent = (code >> E4M3_MANTISSA_BITS) & 0xF
    mantissa = code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa * E4M3_SUBNORMAL_STEP
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - E4M3_EXPONENT_BIAS)


_E4M3_TABLE = [e4m3_value(code) for code in range(256)]
_E4M3_POSITIVE = _E4M3_TABLE[:E4M3_MAX_CODE + 1]   # codes 0 .. 0x7E, ascending


def e4m3_codes(tensor):
    """The bytes of an e4m3 tensor (uint8 codes, or torch.float8_e4m3fn viewed as uint8)."""
    return tensor if tensor.dtype == torch.uint8 else tensor.view(torch.uint8)


def e4m3_decode(codes, dtype=torch.float64):
    """e4m3 codes (uint8 or float8_e4m3fn) to `dtype`."""
    table = torch.tensor(_E4M3_TABLE, dtype=torch.float64, device=codes.device)
    return table[e4m3_codes(codes).long()].to(dtype)


def e4m3_encode(x):
    """The tensor x of floats to e4m3 codes (uint8): round to nearest even, saturate to +-448,
    NaN/inf -> NaN code with the input's sign. Returns (codes, number of non-finite inputs)."""
    x = x.float()
    magnitude = x.abs().double()
    values = torch.tensor(_E4M3_POSITIVE, dtype=torch.float64, device=x.device)
    finite = torch.isfinite(x)
    below_max = magnitude < E4M3_MAX
    clamped = torch.where(below_max & finite, magnitude, torch.zeros_like(magnitude))
    low = (torch.searchsorted(values, clamped.contiguous(), right=True) - 1).clamp(0, E4M3_MAX_CODE - 1)
    high = low + 1
    to_low = clamped - values[low]
    to_high = values[high] - clamped
    take_high = (to_high < to_low) | ((to_high == to_low) & (high % 2 == 0))
    code = torch.where(take_high, high, low)
    code = torch.where(below_max, code, torch.full_like(code, E4M3_MAX_CODE))
    code = torch.where(finite, code, torch.full_like(code, E4M3_NAN_CODE))
    code = code | (torch.signbit(x).long() * E4M3_SIGN)
    return code.to(torch.uint8), int((~finite).sum())


def compute_scale(src, slot_mapping=None):
    """Per-tensor e4m3 scale of src, a [tokens, heads, head_dim] tensor: max(amax / 448, 2^-126)
    over the finite inputs of the tokens whose slot_mapping entry is >= 0 (None: every token).
    Returns (float32 scale [1], non-finite count)."""
    values = src.float()
    if slot_mapping is not None:
        values = values[slot_mapping.to(values.device) >= 0]
    finite = torch.isfinite(values)
    amax = values.abs()[finite].max() if bool(finite.any()) else torch.zeros((), device=src.device)
    scale = torch.clamp(amax.float().reshape(1) / E4M3_MAX, min=E4M3_MIN_SCALE).float()
    return scale, int((~finite).sum())


# The largest power-of-two scale (fp8/codec/e4m3.h kE4m3MaxPowerOfTwoScale): 448 x 2^119 is a
# finite float, 256 x 2^120 is not.
MAX_POWER_OF_TWO_SCALE = 2.0 ** 119


def power_of_two_scale(scale):
    """The smallest power of two >= each element of `scale` (float32, positive finite), by frexp /
    ldexp (exact); an element above MAX_POWER_OF_TWO_SCALE stays as it is (2^120 would decode the
    largest codes to infinity). What wideattn_compute_scale_pow2 writes."""
    mantissa, exponent = torch.frexp(scale)
    # mantissa in [0.5, 1): a power of two has 0.5 and stays; anything else rounds up to 2^exponent.
    keep = (mantissa == 0.5) | (scale > MAX_POWER_OF_TWO_SCALE)
    return torch.where(keep, scale, torch.ldexp(torch.ones_like(scale), exponent))


def quantize(src, scale):
    """e4m3 codes of src * (1 / scale) (the reciprocal in float32, as the kernel takes it) and
    the number of non-finite inputs."""
    reciprocal = 1.0 / scale.float().reshape(())
    return e4m3_encode(src.float() * reciprocal)


def _flat(base):
    """A 1-D view of base's storage from its first element to the end of the storage."""
    if hasattr(base, "untyped_storage"):
        storage_elems = base.untyped_storage().nbytes() // base.element_size()
    else:
        storage_elems = base.storage().size()
    return torch.as_strided(base, (storage_elems - base.storage_offset(),), (1,), base.storage_offset())


def _dequantised(tensor, scale, dtype):
    if tensor.dtype == torch.uint8 or "float8" in str(tensor.dtype):
        return e4m3_decode(tensor, dtype) * scale.to(dtype).reshape(())
    return tensor.to(dtype)


def v_slot_position(slot):
    """Byte position of slot `slot` (an int or an integer tensor) in its transposed V page row:
    16 (s / 16) + 4 ((s / 2) % 4) + 2 ((s / 8) % 2) + s % 2 (v_slot_position of
    kernels/common/v_transposed.h)."""
    group, in_group = slot // V_GROUP_SLOTS, slot % V_GROUP_SLOTS
    quad, lane_pair = in_group // V_QUAD_SLOTS, (in_group % V_QUAD_SLOTS) // V_PAIR_SLOTS
    return group * V_GROUP_SLOTS + lane_pair * V_LANE_BYTES + quad * V_PAIR_SLOTS + in_group % V_PAIR_SLOTS


def slot_rows(blocks, in_block, block_size, block_stride, slot_stride, transposed=False):
    """(element offset of dim 0 of head 0 of slot in_block of block blocks (long tensors), the
    stride between consecutive dims): the engine layout's blocks * block_stride + in_block *
    slot_stride with dims adjacent, or with `transposed` the transposed V layout's blocks *
    block_stride + v_slot_position(in_block) with dims block_size apart."""
    if transposed:
        return blocks * block_stride + v_slot_position(in_block), block_size
    return blocks * block_stride + in_block * slot_stride, 1


def gather_keys(base, layout, block_row, length, head_dim, dtype, scale=None, transposed=False):
    """Keys 0 .. length-1 of one sequence ([length, num_kv_heads, head_dim]) read from the tensor
    base through its block-table row block_row and the KV layout (LAYOUT_FIELDS), exactly as the
    kernels address them; converted to dtype, dequantised by the scale tensor when given (e4m3).
    transposed: base is a V cache in the transposed layout (slot_rows; slot_stride 1)."""
    offset, _, block_size, heads, block_stride, slot_stride, head_stride = layout
    keys = torch.arange(length, device=base.device)
    blocks = block_row.to(base.device).long()[keys // block_size]
    row, dim_stride = slot_rows(blocks, keys % block_size, block_size, block_stride, slot_stride, transposed)
    index = (offset + row[:, None, None] + torch.arange(heads, device=base.device)[None, :, None] * head_stride +
             torch.arange(head_dim, device=base.device)[None, None, :] * dim_stride)
    return _dequantised(_flat(base)[index], scale, dtype)


def k_from_v_inv_freq(head_dim, rotary_dims, rope_theta, inv_freq=None):
    """inv_freq of the head_dim / 2 frequencies of a K-from-V description (float32, on the CPU):
    the caller's table `inv_freq` (float32 [rotary_dims / 2], used as it is) or else 1 /
    fp32(rope_theta ^ (2i / head_dim)) with the power in float64 rounded once to float32, for
    i < rotary_dims / 2; 0 for the rest (rope_inv_freq and k_from_v_inv_freq of
    kernels/common/k_from_v.h)."""
    frequencies = torch.zeros(head_dim // 2, dtype=torch.float32)
    count = rotary_dims // 2
    if inv_freq is not None:
        frequencies[:count] = inv_freq.detach().to("cpu", torch.float32).reshape(-1)[:count]
    elif count:
        exponent = torch.arange(0, rotary_dims, 2, dtype=torch.float32) / float(head_dim)   # fp32 division
        theta = torch.tensor(rope_theta, dtype=torch.float32).double()
        frequencies[:count] = 1.0 / torch.pow(theta, exponent.double()).float()
    return frequencies


def k_from_v_keys(values, positions, k_norm_scale, frequencies, cos_sin=None):
    """K rebuilt from V ([length, num_kv_heads, head_dim], any float dtype holding the dequantised
    values; the float32 value of each is the kernels' V) for keys at `positions` ([length], their
    indices in the sequence), k_norm_scale the weight w ([head_dim]) and frequencies the
    head_dim / 2 inv_freq of k_from_v_inv_freq, with the rounding steps of kernels/common/k_from_v.h:
    x = bf16(V w); c, s = bf16(cos / sin(fp32(position inv_freq))); K = bf16(bf16(x c) -
    bf16(x' s)) for the first half of the dims, bf16(bf16(x' c) + bf16(x s)) for the second (x'
    the partner d -+ head_dim / 2). bf16 tensor arithmetic rounds each product and sum once, as the
    formula does. Returns K as bf16 [length, num_kv_heads, head_dim]. cos / sin are torch's
    float32 ones: their bf16 values can differ from the kernels' at rare rounding ties.
    cos_sin: a cos / sin table (bf16 [rows, rotary_dims / 2, 2], (cos, sin) per position and
    frequency, as wideattn_k_from_v.cos_sin holds it) or None: a key at a position below `rows`
    takes c, s of its first rotary_dims / 2 frequencies from the table as they are stored."""
    half = values.shape[-1] // 2
    weight = k_norm_scale.detach().to(values.device, torch.float32)
    x = (values.float() * weight).bfloat16()
    positions = positions.to(values.device)
    angle = positions.to(torch.float32)[:, None] * frequencies.to(values.device)[None, :]
    c = torch.cos(angle).bfloat16()
    s = torch.sin(angle).bfloat16()
    if cos_sin is not None:
        table = cos_sin.detach().to(values.device, torch.bfloat16)
        held = positions < table.shape[0]
        rows = positions[held].long()
        count = table.shape[1]
        c[held, :count] = table[rows, :, 0]
        s[held, :count] = table[rows, :, 1]
    c, s = c[:, None, :], s[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return torch.cat((first * c - second * s, second * c + first * s), dim=-1)


def transposed_v_cache(cache):
    """The codes of an e4m3 V cache [num_blocks, block_size, num_kv_heads, head_dim] (uint8 or
    float8_e4m3fn) rearranged, none recomputed, into a new contiguous cache of the transposed
    layout [num_blocks, num_kv_heads, head_dim, block_size] (slot s of each page row at byte
    v_slot_position(s)), on the same device and of the same dtype: what a cache written by
    wideattn.quantize_to_cache(..., v_transposed=True) holds for the same codes. block_size must be
    a multiple of 16."""
    num_blocks, block_size, heads, head_dim = cache.shape
    if block_size % V_GROUP_SLOTS:
        raise ValueError(f"cache.shape[1]={block_size} (block_size) is not a multiple of {V_GROUP_SLOTS}")
    positions = v_slot_position(torch.arange(block_size, device=cache.device))
    # Moved as bytes: index_copy_ has no float8 implementation on CUDA.
    codes = cache.view(torch.uint8)
    out = torch.empty((num_blocks, heads, head_dim, block_size), dtype=torch.uint8, device=cache.device)
    out.index_copy_(3, positions, codes.permute(0, 2, 3, 1))
    return out.view(cache.dtype)


def _lengths_error(cu, lengths, total_q, row_keys, note):
    """The message of the first broken cu_seqlens_q / seq_lens_k rule of checked mode (ending in
    `note`), or None."""
    for i, value in enumerate(cu):
        if i == 0 and value != 0:
            return f"cu_seqlens_q[0] = {value} is not 0 (the first sequence starts at query row 0; {note})"
        if i > 0 and value < cu[i - 1]:
            return (f"cu_seqlens_q[{i}] = {value} is below cu_seqlens_q[{i - 1}] = {cu[i - 1]} "
                    f"(must be non-decreasing; {note})")
        if value > total_q:
            return (f"cu_seqlens_q[{i}] = {value} is above total_q = {total_q} "
                    f"(no sequence ends past the last query row; {note})")
    if cu[-1] != total_q:
        return (f"cu_seqlens_q[{len(cu) - 1}] = {cu[-1]} is not total_q = {total_q} "
                f"(cu_seqlens_q[num_seqs] must equal total_q; {note})")
    for s, length in enumerate(lengths):
        q_len = cu[s + 1] - cu[s]
        if length < q_len:
            return (f"seq_lens_k[{s}] = {length} is below q_len = {q_len} of sequence {s} (cu_seqlens_q[{s + 1}] - "
                    f"cu_seqlens_q[{s}]; its keys include its new tokens; {note})")
        if length > row_keys:
            return _row_keys_message(s, length, row_keys, note)
    return None


def _row_keys_message(s, length, row_keys, note):
    """The message (ending in `note`) of sequence s's seq_lens_k entry `length` above the
    `row_keys` keys one block_table row addresses."""
    return (f"seq_lens_k[{s}] = {length} is above block_table_stride * block_size = {row_keys} "
            f"(the keys one block_table row addresses; {note})")


def _blocks_error(lengths, block_table, block_size, num_blocks, note):
    """The message of the first used block_table entry outside [0, num_blocks), or None."""
    stride = block_table.stride(0)
    table = _flat(block_table)
    for s, length in enumerate(lengths):
        used = -(-length // block_size)
        for j, entry in enumerate(table[s * stride:s * stride + used].tolist()):
            if not 0 <= entry < num_blocks:
                return (f"block_table[{s}][{j}] = {entry} (sequence {s}, key block {j}) is outside "
                        f"[0, num_blocks = {num_blocks}) ({note})")
    return None


def metadata_error(cu_seqlens_q, seq_lens_k, block_table, total_q, block_size, num_blocks, note=CHECKED_MODE):
    """The library's message for the first entry of a call's metadata that breaks a rule of
    checked mode (WIDEATTN_FLAG_CHECK_METADATA, dispatch/metadata_check.h), or None: the CPU
    implementation's mirror of the library's host check of cu_seqlens_q, seq_lens_k and
    block_table against total_q, block_size and num_blocks. Rows are read as the library reads
    them, block_table.stride(0) entries apart, each up to ceil(seq_lens_k[s] / block_size) entries.
    Each message ends in `note` (default: "checked mode")."""
    cu, lengths = cu_seqlens_q.tolist(), seq_lens_k.tolist()
    error = _lengths_error(cu, lengths, total_q, block_table.stride(0) * block_size, note)
    return error if error is not None else _blocks_error(lengths, block_table, block_size, num_blocks, note)


def addressing_error(seq_lens_k, block_table, block_size, num_blocks, note):
    """The message (ending in `note`) of the first key the reference could not read, or None: a
    seq_lens_k entry past its block_table row (block_table.stride(0) * block_size keys), or a used
    block_table entry outside [0, num_blocks) (checked mode's rules on seq_lens_k and block_table;
    where the kernels would clamp, indexing would fail or, for a negative block, wrap to the
    cache's end)."""
    lengths = seq_lens_k.tolist()
    row_keys = block_table.stride(0) * block_size
    for s, length in enumerate(lengths):
        if length > row_keys:
            return _row_keys_message(s, length, row_keys, note)
    return _blocks_error(lengths, block_table, block_size, num_blocks, note)


def attention(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
              q_scale=None, k_scale=None, v_scale=None, dtype=torch.float64, v_transposed=False, k_from_v=None):
    """Output [total_q, num_q_heads, head_dim] and LSE [num_q_heads, total_q] (natural log) of one
    prefill call, in `dtype`: causal bottom-right per sequence, GQA, rows without a key = 0 / -inf.
    q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout and softmax_scale as the
    wideattn::prefill op takes them (wideattn.ops); q_scale, k_scale, v_scale dequantise e4m3
    inputs (None for bf16); v_transposed: v is in the transposed V layout (gather_keys).
    k_from_v: (k_norm_scale, frequencies from k_from_v_inv_freq) or (k_norm_scale, frequencies,
    cos_sin table or None) for a V-only cache: each sequence's keys are rebuilt from its values at
    positions 0, 1, ... (k_from_v_keys); k, k_layout and k_scale are not read."""
    total_q, num_q_heads, head_dim = q.shape
    queries = _dequantised(q, q_scale, dtype)
    out = torch.zeros((total_q, num_q_heads, head_dim), dtype=dtype, device=q.device)
    lse = torch.full((num_q_heads, total_q), -math.inf, dtype=dtype, device=q.device)
    cu = cu_seqlens_q.tolist()
    lengths = seq_lens_k.tolist()
    group = num_q_heads // k_layout[3]
    for s in range(len(lengths)):
        begin, end, length = cu[s], cu[s + 1], lengths[s]
        q_len = end - begin
        if q_len == 0 or length == 0:
            continue
        values = gather_keys(v, v_layout, block_table[s], length, head_dim, dtype, v_scale,
                             v_transposed).to(q.device)
        if k_from_v is None:
            keys = gather_keys(k, k_layout, block_table[s], length, head_dim, dtype, k_scale).to(q.device)
        else:
            positions = torch.arange(length, device=q.device)
            keys = k_from_v_keys(values, positions, *k_from_v).to(dtype)
        keys = keys.transpose(0, 1).repeat_interleave(group, dim=0)        # [Hq, L, D]
        values = values.transpose(0, 1).repeat_interleave(group, dim=0)
        scores = torch.matmul(queries[begin:end].transpose(0, 1), keys.transpose(1, 2)) * softmax_scale
        visible = (torch.arange(length, device=q.device)[None, :] <=
                   (length - q_len + torch.arange(q_len, device=q.device))[:, None])
        scores = scores.masked_fill(~visible[None], -math.inf)
        row_lse = torch.logsumexp(scores, dim=-1)                           # [Hq, q_len]
        has_key = visible.any(dim=-1)[None, :].expand_as(row_lse)
        weights = torch.where(has_key[..., None], torch.exp(scores - row_lse[..., None]),
                              torch.zeros_like(scores))
        out[begin:end] = torch.matmul(weights, values).transpose(0, 1)
        lse[:, begin:end] = torch.where(has_key, row_lse, torch.full_like(row_lse, -math.inf))
    return out, lse
