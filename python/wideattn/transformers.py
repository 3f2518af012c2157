"""transformers integration: `wideattn.transformers.register()` adds the attention function
"wideattn" (and "paged|wideattn" for continuous batching) to transformers.AttentionInterface and
the SDPA mask format under the same names to AttentionMaskInterface, so that

    model = Gemma4ForCausalLM(config)                    # or from_pretrained(...)
    model.set_attn_implementation("wideattn")            # or attn_implementation="wideattn"

runs the layers wideattn serves (bf16 on CUDA, a head dim and GQA group of the bundle's bf16
kernels: Gemma 4's 512-dim global layers; causal, no sliding window, no softcap, no dropout, no
gradient) on the `wideattn::prefill` op and hands every other layer (Gemma 4's 256-dim sliding
layers, training, ...) with its arguments unchanged to transformers' SDPA function.

Two call shapes reach attention_forward:
  - ordinary forward (generate with a DynamicCache/StaticCache, or no cache): query
    [B, Hq, T, D], key/value [B, Hkv, S, D] (S = cached + new keys) and the 4-D SDPA mask. The mask
    is read as "keys start_b .. end_b-1 of batch row b, causal bottom-right" (left padding, a
    static cache's unused tail); K/V are described as token-row pages of the cache tensors (no
    copy), padded query rows become a separate sequence and their outputs are zeroed. In eager
    mode the mask is checked against that pattern (one host sync) and any other mask goes to
    SDPA; under torch.compile or CUDA-graph capture the check is skipped.
  - continuous batching (generate_batch): kwargs carry transformers' PagedAttentionCache
    (`cache`) and packed metadata (cu_seq_lens_q/k, max_seqlen_q/k, read_index, write_index).
    The new K/V go into transformers' own paged cache through cache.update(), which returns the
    sequences' keys as dense rows; the op reads them through token-row pages (varlen).
Both pass the op host-side length hints (max_seqlen_q / max_seqlen_k: the query and key lengths
of the call, or the continuous-batching metadata's) for its split-KV choice; no device tensor is
read for them, so decode steps stay capturable in CUDA graphs.
"""

import logging
import math

import torch

from . import attention as _attention
from .library import default_context

NAME = "wideattn"
PAGED_PREFIX = "paged|"
FULL_ATTENTION = "full_attention"
SDPA = "sdpa"
# Tests only: True runs CPU tensors through the op's CPU (reference) implementation instead of
# handing them to SDPA.
CPU_REFERENCE = False

_log = logging.getLogger(__name__)
_served = {}
_warned = set()
# Calls per path since import: "dense" and "paged" ran on wideattn, "sdpa" were handed over.
calls = {"dense": 0, "paged": 0, "sdpa": 0}


def register(name=NAME):
    """Registers the attention function and its mask format under `name` and "paged|" + name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(name, attention_forward)
    AttentionInterface.register(PAGED_PREFIX + name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    paged_sdpa = PAGED_PREFIX + SDPA
    paged_mask = ALL_MASK_ATTENTION_FUNCTIONS[paged_sdpa] if paged_sdpa in ALL_MASK_ATTENTION_FUNCTIONS.valid_keys() \
        else sdpa_mask
    AttentionMaskInterface.register(PAGED_PREFIX + name, paged_mask)
    return name


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        _log.warning(message)


def _fallback(paged):
    """transformers' own SDPA function (its paged variant for a continuous-batching call, where
    the installed version has one)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    if paged and PAGED_PREFIX + SDPA in ALL_ATTENTION_FUNCTIONS.valid_keys():
        return ALL_ATTENTION_FUNCTIONS[PAGED_PREFIX + SDPA]
    return ALL_ATTENTION_FUNCTIONS[SDPA]


def served_shape(head_dim, group):
    """Whether the bundle has a bf16 prefill kernel for head_dim and group (num_q_heads /
    num_kv_heads); cached per pair."""
    key = (head_dim, group)
    if key not in _served:
        _served[key] = any(
            k.kind == "prefill" and (k.q_dtype, k.kv_dtype, k.o_dtype) == ("bf16", "bf16", "bf16")
            and k.head_dim[0] <= head_dim <= k.head_dim[1] and (head_dim - k.head_dim[0]) % k.head_dim[2] == 0
            and k.group[0] <= group <= k.group[1]
            for k in default_context().kernels())
    return _served[key]


def unserved_reason(module, query, key, value, kwargs):
    """Why the call of `module` (the attention layer) on query / key / value [B, H, T, D] with the
    AttentionInterface kwargs goes to SDPA instead (None: wideattn runs it)."""
    if query.device.type != "cuda" and not (CPU_REFERENCE and query.device.type == "cpu"):
        return f"tensors on {query.device}"
    if any(t.dtype != torch.bfloat16 for t in (query, key, value)):
        return f"dtype {query.dtype}/{key.dtype}/{value.dtype}"
    if kwargs.get("sliding_window") is not None:
        return "a sliding window"
    if kwargs.get("softcap"):
        return "an attention softcap"
    if kwargs.get("dropout", 0.0) and module.training:
        return "dropout"
    if kwargs.get("output_attentions") or kwargs.get("s_aux") is not None:
        return "attention weights or sinks requested"
    if kwargs.get("is_causal") is False or not getattr(module, "is_causal", True):
        return "non-causal attention"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "gradients (the kernels have no backward)"
    if value.shape[-1] != query.shape[-1] or key.shape[1] != value.shape[1] or query.shape[1] % key.shape[1]:
        return "unequal head dims or heads"
    if not served_shape(query.shape[-1], query.shape[1] // key.shape[1]):
        return f"head_dim {query.shape[-1]}, group {query.shape[1] // key.shape[1]} not in the bundle"
    return None


def attention_forward(module, query, key, value, attention_mask, **kwargs):
    """The AttentionInterface function: `module` the attention layer, query [B, Hq, T, D], key /
    value [B, Hkv, S, D], attention_mask in SDPA format (or None), kwargs transformers' (scaling,
    sliding_window, the paged cache and its metadata, ...). Returns (attn_output [B, T, Hq, D],
    None); a call wideattn does not serve goes to SDPA."""
    paged = is_paged_call(kwargs)
    result = None
    if unserved_reason(module, query, key, value, kwargs) is None:
        scaling = kwargs.get("scaling")
        scaling = float(scaling) if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
        if paged:
            result = _paged_forward(module, query, key, value, scaling, kwargs)
        else:
            result = _dense_forward(query, key, value, attention_mask, scaling)
    if result is None:
        calls["sdpa"] += 1
        return _fallback(paged)(module, query, key, value, attention_mask, **kwargs)
    calls["paged" if paged else "dense"] += 1
    return result, None


def is_paged_call(kwargs):
    """Whether the call's kwargs make it a continuous-batching call: a paged cache object with
    update() and packed metadata."""
    cache = kwargs.get("cache")
    return cache is not None and hasattr(cache, "update") and (
        "cu_seq_lens_q" in kwargs or "cumulative_seqlens_q" in kwargs)


def _capturing_or_compiling(tensor):
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling():
        return True
    return tensor.is_cuda and torch.cuda.is_current_stream_capturing()


def mask_plan(attention_mask, batch, q_len, kv_len, device, verify=True):
    """(pad_rows, key_start, key_len) per batch row as int64 device tensors, from attention_mask:
    an SDPA-format mask (bool [B|1, 1, T, S], or additive float), a 2-D padding mask [B, S], or
    None (causal, no padding); None when the mask is not causal-with-a-key-range (verified when
    `verify`). batch, q_len and kv_len are the call's B, T and S; the tensors are made on
    `device`."""
    if attention_mask is None:
        zeros = torch.zeros(batch, dtype=torch.int64, device=device)
        return zeros, zeros, torch.full((batch,), kv_len, dtype=torch.int64, device=device)
    mask = attention_mask
    if mask.dim() == 2:
        if tuple(mask.shape) != (batch, kv_len):
            return None
        allowed = _causal_from_padding(mask.bool(), q_len, kv_len)
    elif mask.dim() == 4 and mask.shape[1] == 1 and tuple(mask.shape[2:]) == (q_len, kv_len) \
            and mask.shape[0] in (1, batch):
        allowed = mask[:, 0] if mask.dtype == torch.bool else mask[:, 0] == 0
        allowed = allowed.expand(batch, q_len, kv_len)
    else:
        return None
    last = allowed[:, -1, :]
    positions = torch.arange(kv_len, device=device)
    start = torch.where(last, positions, torch.full_like(positions, kv_len)).min(dim=-1).values
    end = torch.where(last, positions + 1, torch.zeros_like(positions)).max(dim=-1).values
    pad_rows = (start - end + q_len).clamp(0, q_len)
    if verify and not _matches(mask, allowed, start, end, pad_rows, q_len, positions):
        return None
    return pad_rows, start, (end - start).clamp(min=0)


def _causal_from_padding(padding, q_len, kv_len):
    rows = torch.arange(q_len, device=padding.device)[:, None]
    cols = torch.arange(kv_len, device=padding.device)[None, :]
    return padding[:, None, :] & (cols <= kv_len - q_len + rows)[None]


def _matches(mask, allowed, start, end, pad_rows, q_len, positions):
    """One host sync: every valid query row allows exactly keys start .. end - T + i, every row
    of the batch has a key, and an additive mask holds only 0 and large negatives."""
    rows = torch.arange(q_len, device=allowed.device)
    expected = (positions[None, None, :] >= start[:, None, None]) & \
               (positions[None, None, :] <= (end[:, None, None] - q_len + rows[None, :, None]))
    valid_rows = rows[None, :] >= pad_rows[:, None]
    wrong = ((allowed != expected) & valid_rows[..., None]).any()
    empty = (end <= start).any()
    if mask.dtype.is_floating_point:
        lowest = torch.finfo(mask.dtype).min / 2
        wrong = wrong | ~((mask == 0) | (mask <= lowest)).all()
    return not bool(wrong | empty)


def _rows_per_batch(tensor):
    """Rows of token stride between two batch entries of a [B, H, S, D] tensor (None: not a multiple)."""
    if tensor.stride(-1) != 1 or tensor.stride(0) % tensor.stride(2):
        return None
    return tensor.stride(0) // tensor.stride(2)


def _dense_forward(query, key, value, attention_mask, scaling):
    """An ordinary forward's served layer; None hands it to SDPA (a mask of another shape)."""
    batch, q_heads, q_len, head_dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    verify = not _capturing_or_compiling(query)
    plan = mask_plan(attention_mask, batch, q_len, kv_len, query.device, verify)
    if plan is None:
        _warn_once("mask", "wideattn: an attention mask other than causal with left padding or a cache tail; "
                           "those calls run on SDPA")
        return None
    pad_rows, key_start, key_len = plan
    if _rows_per_batch(key) is None or key.stride() != value.stride():
        key, value = key.contiguous(), value.contiguous()
    rows_per_batch = _rows_per_batch(key)
    num_rows = (batch - 1) * rows_per_batch + kv_len
    batch_rows = torch.arange(batch, device=query.device) * rows_per_batch
    # Sequence 2b: batch row b's padded query rows over its first keys (finite, zeroed below);
    # sequence 2b+1: its real query rows over keys key_start .. key_start + key_len - 1.
    q_lens = torch.stack([pad_rows, q_len - pad_rows], dim=1).reshape(-1)
    cu_seqlens_q = torch.cat([q_lens.new_zeros(1), torch.cumsum(q_lens, 0)]).to(torch.int32)
    seq_lens_k = torch.stack([pad_rows, key_len], dim=1).reshape(-1).to(torch.int32)
    row_start = torch.stack([batch_rows, batch_rows + key_start], dim=1).reshape(-1)
    q_rows = query.transpose(1, 2).reshape(batch * q_len, q_heads, head_dim)
    k_rows = _attention.token_row_layout(key, key.stride(2), key.stride(1), num_rows, kv_heads)
    v_rows = _attention.token_row_layout(value, value.stride(2), value.stride(1), num_rows, kv_heads)
    out = torch.empty((batch * q_len, q_heads, head_dim), dtype=torch.bfloat16, device=query.device)
    # Host hints for the split-KV count: no sequence has more than q_len queries or kv_len keys.
    _attention.rows_prefill(q_rows, key, value, k_rows, v_rows, cu_seqlens_q, row_start, seq_lens_k, kv_len,
                            scaling, out, max_seqlen_q=q_len)
    out = out.view(batch, q_len, q_heads, head_dim)
    if attention_mask is not None:
        padded = torch.arange(q_len, device=query.device)[None, :] < pad_rows[:, None]
        out = out.masked_fill(padded[:, :, None, None], 0)
    return out


def _layer_value(value):
    return value[FULL_ATTENTION] if isinstance(value, dict) else value


def _specialize(cache, layer_idx, num_tokens, kwargs):
    """transformers versions whose cache picks the per-layer-group metadata first."""
    try:
        return cache.specialize_kwargs(layer_idx, num_tokens, kwargs)
    except TypeError:
        return cache.specialize_kwargs(layer_idx, kwargs)


def _host_hint(value):
    """A length hint as a host int: a Python int as given, anything else (absent, a device
    tensor, which reading would synchronise) unknown (None)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _token_rows(states, kv_heads, head_dim):
    """cache.update()'s keys as [total_k, Hkv, D] rows ([1, Hkv, total_k, D] head-major is transposed)."""
    if states.dim() == 4 and states.shape[1] == kv_heads and states.shape[2] != kv_heads:
        states = states[0].transpose(0, 1)
    return states.reshape(-1, kv_heads, head_dim)


def _paged_forward(module, query, key, value, scaling, kwargs):
    """A continuous-batching call's served layer: write the new K/V into the paged cache, attend
    over the dense rows cache.update() returns. query [1, Hq, total_q, D]."""
    cache, local = kwargs["cache"], dict(kwargs)
    _, q_heads, total_q, head_dim = query.shape
    kv_heads = key.shape[1]
    if hasattr(cache, "specialize_kwargs"):
        key, value = key.transpose(1, 2).contiguous(), value.transpose(1, 2).contiguous()
        if not _specialize(cache, module.layer_idx, key.shape[1], local):
            _warn_once("paged", "wideattn: this paged cache asks the kernel to write the cache itself; "
                                "those calls run on SDPA")
            return None
    keys, values = cache.update(key_states=key, value_states=value, layer_idx=module.layer_idx,
                                read_index=local["read_index"], write_index=local["write_index"])
    keys, values = _token_rows(keys, kv_heads, head_dim), _token_rows(values, kv_heads, head_dim)
    cu_q = local.get("cu_seq_lens_q", local.get("cumulative_seqlens_q")).to(torch.int32)
    cu_k = _layer_value(local.get("cu_seq_lens_k", local.get("cumulative_seqlens_k"))).to(torch.int32)
    max_k = int(_layer_value(local["max_seqlen_k"]))
    max_q = _host_hint(_layer_value(local.get("max_seqlen_q")))
    q_rows = query.transpose(1, 2).reshape(total_q, q_heads, head_dim)
    out = _attention.varlen_attention(q_rows, keys, values, cu_q, cu_k, max_q, max_k, scaling)
    return out.view(1, total_q, q_heads, head_dim)
