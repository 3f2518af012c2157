"""V-only caches for Gemma 4's global layers in transformers (K from V: docs/design.md section 2,
"K from V in Gemma 4's global layers"; docs/integration.md section 7).

Gemma 4's global layers (attention_k_eq_v) take K and V from one projection: V = v_norm(p),
K = RoPE(k_norm(p)). `v_only_cache(model)` makes a transformers DynamicCache whose global layers
keep V alone (half their cache); wideattn.transformers' attention function ("wideattn") then
rebuilds each key's K from its V row inside the kernels (wideattn.prefill_k_from_v), with the
layer's k_norm weight and the model's own RoPE frequencies. The sliding layers keep transformers'
K and V.

How a V-only layer talks to the attention function (transformers' attention modules call
cache.update(key, value) and hand what it returns to the attention function):
  - the first update of a layer (the prompt, over an empty cache) returns the prompt's own K and
    the cached V: that call is an ordinary K + V call (the K is at hand, nothing is rebuilt);
  - every later update (decode steps, chunks of a chunked prefill) stores V and returns the cached
    V as both key and value (the same tensor object): the attention function reads `key is value`
    on such a layer as "rebuild K from V" (is_v_only_call) and serves it with
    wideattn.prefill_k_from_v over a paged copy of V (k_from_v_forward).
A V-only layer therefore works with the "wideattn" attention only: its update refuses another
attention implementation by name, since any other function would take V for K without an error.

Served calls: any batch whose mask is causal with left padding (a row's keys from its first real
token on, their RoPE positions 0 .. from there, as transformers numbers a left-padded row: each
row's real keys are copied into pages of their own, by device ops alone for a decode step; a mask
of another form is refused), any number of new tokens over the cache (one token: the dispatcher's K-from-V decode kernel; more:
prefill_k_from_v rebuilds the keys once into a bf16 K + V scratch, wideattn_k_from_v_rebuild, and
runs the dispatcher's K + V prefill kernel over it; until C API 0.8.0 such calls pinned the decode
kernel by name, one block per token, each block rebuilding every key it read, and the pin applied to
every call of the default context meanwhile). With e4m3=True each call quantises the cached V
into an e4m3 V-only cache with one scale (wideattn.compute_scale / quantize_to_cache) and the
kernels rebuild K from the e4m3 V: the 8-bit variant of the same path. The paged copy of V is made
per call (the cache itself holds transformers' [B, Hkv, S, D] V); this path is for the accuracy
gates and the memory saving, its host and copy costs are not tuned.
"""

import inspect

import torch

from . import attention as _attention
from . import quantization as _quantization

FULL_ATTENTION = "full_attention"
PAGE_SLOTS = 16                      # slots per page of the per-call V-only cache
ATTENTION_NAMES = ("wideattn",)      # the attention implementations a V-only layer works with

# Calls served by k_from_v_forward since import (tests and benchmarks).
calls = {"k_from_v": 0}
_layer_class = {}
# Per layer index: whether the V-only layer's last update asked for e4m3 V (read by the attention
# call that follows it in the same module's forward), and whether its scale is rounded up to a
# power of two (v_only_cache(..., power_of_two_scale=True)).
_layer_e4m3 = {}
_layer_power_of_two = {}


def _dynamic_layer():
    from transformers.cache_utils import DynamicLayer
    return DynamicLayer


def _v_only_layer_class():
    """VOnlyLayer: a DynamicLayer that keeps V only (defined on first use: transformers is
    imported only then)."""
    if "cls" in _layer_class:
        return _layer_class["cls"]
    base = _dynamic_layer()
    # lazy_initialization(key_states) before transformers 5.x's (key_states, value_states).
    init_takes_values = len(inspect.signature(base.lazy_initialization).parameters) >= 3

    class VOnlyLayer(base):
        """A global layer's cache of V alone (module docstring for what update returns)."""

        is_sliding = False

        def __init__(self, config, layer_idx, e4m3, power_of_two_scale=False):
            """config: the model's text config (its attention implementation is checked at each
            update); layer_idx: the layer; e4m3: rebuild K from e4m3 codes of V (module docstring);
            power_of_two_scale: their scale rounded up to a power of two."""
            super().__init__()
            self.config = config
            self.layer_idx = layer_idx
            self.e4m3 = e4m3
            self.power_of_two_scale = power_of_two_scale

        def update(self, key_states, value_states, *args, **kwargs):
            """Stores value_states; returns (the prompt's keys, V) on the first update, (V, V) after
            (args, kwargs: transformers' cache_kwargs, not read)."""
            attention = getattr(self.config, "_attn_implementation", None)
            if attention not in ATTENTION_NAMES:
                raise ValueError(f"wideattn.v_only_cache: layer {self.layer_idx} keeps V only and needs the "
                                 f"attention implementation 'wideattn' (K is rebuilt from V there), not "
                                 f"{attention!r}")
            if not self.is_initialized:
                if init_takes_values:
                    self.lazy_initialization(key_states, value_states)
                else:
                    self.lazy_initialization(key_states)
            first = self.get_seq_length() == 0
            self.values = value_states if first else torch.cat([self.values, value_states], dim=-2)
            if first:
                return key_states, self.values
            _layer_e4m3[self.layer_idx] = self.e4m3
            _layer_power_of_two[self.layer_idx] = self.power_of_two_scale
            return self.values, self.values

        def get_seq_length(self):
            """The cached tokens (V's sequence length)."""
            if not self.is_initialized or self.values.numel() == 0:
                return 0
            return self.values.shape[-2]

        def crop(self, max_length):
            """Keeps the first max_length tokens (negative: drops -max_length)."""
            if max_length < 0:
                max_length = self.get_seq_length() + max_length
            if self.get_seq_length() > max_length:
                self.values = self.values[..., :max_length, :]

        def reorder_cache(self, beam_idx):
            """Reorders the batch rows (beam search)."""
            if self.get_seq_length() > 0:
                self.values = self.values.index_select(0, beam_idx.to(self.values.device))

        def batch_repeat_interleave(self, repeats):
            """Repeats each batch row `repeats` times."""
            if self.get_seq_length() > 0:
                self.values = self.values.repeat_interleave(repeats, dim=0)

        def batch_select_indices(self, indices):
            """Keeps the batch rows `indices`."""
            if self.get_seq_length() > 0:
                self.values = self.values[indices, ...]

        def reset(self):
            """Empties the layer."""
            if self.is_initialized:
                self.values = self.values[..., :0, :]

    _layer_class["cls"] = VOnlyLayer
    return VOnlyLayer


def _text_config(config):
    """The decoder's text config of a model config (Gemma 4's multimodal configs nest it)."""
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def k_from_v_layers(config):
    """The layer indices whose K a V-only cache rebuilds from V: the full-attention layers of a
    config with attention_k_eq_v (Gemma 4's global layers). Raises ValueError for a config without
    attention_k_eq_v (its K is not a function of its V)."""
    text = _text_config(config)
    if not getattr(text, "attention_k_eq_v", False):
        raise ValueError("wideattn.v_only_cache: the model's config has no attention_k_eq_v (its global layers' K "
                         "is not a function of their V), so no layer can keep V only")
    return [i for i, kind in enumerate(text.layer_types) if kind == FULL_ATTENTION]


def v_only_cache(model, e4m3=False, power_of_two_scale=False):
    """A transformers DynamicCache for `model` (a Gemma 4 model with attention_k_eq_v) whose global
    layers keep V only (module docstring); pass it as past_key_values to generate or forward with
    the "wideattn" attention. e4m3: the kernels rebuild K from e4m3 codes of V (one scale per
    call); power_of_two_scale (with e4m3): that scale rounded up to a power of two
    (wideattn.power_of_two_scale), the form in which a K-from-V decode kernel may rebuild K with one
    bf16 product a pair of dims (decode_e4m3kfvb_d512). Registers the model's k_norm weights and
    RoPE frequencies for k_from_v_forward."""
    if power_of_two_scale and not e4m3:
        raise ValueError("wideattn.v_only_cache: power_of_two_scale=True rounds the e4m3 scale of V; it needs e4m3=True")
    from transformers import DynamicCache
    config = model.config
    text = _text_config(config)
    layers = k_from_v_layers(config)
    register_model(model)
    cache = DynamicCache(config=config)
    if len(cache.layers) != len(text.layer_types) - getattr(text, "num_kv_shared_layers", 0):
        raise ValueError(f"wideattn.v_only_cache: DynamicCache(config=...) made {len(cache.layers)} layers for "
                         f"{len(text.layer_types)} layer types (a transformers version this module does not know)")
    layer_class = _v_only_layer_class()
    for i in layers:
        if i < len(cache.layers):
            cache.layers[i] = layer_class(text, i, e4m3, power_of_two_scale)
    return cache


# Per attention module (by id): (k_norm weight fp32 [D], inv_freq fp32 [rotary_dims / 2], rotary_dims).
_modules = {}


def _rotary_buffer(model):
    """The model's global-layer RoPE frequencies (transformers' Gemma4TextRotaryEmbedding buffer)."""
    for module in model.modules():
        buffer = getattr(module, "full_attention_inv_freq", None)
        if buffer is not None:
            return buffer
    raise ValueError("wideattn.v_only_cache: no rotary embedding with full_attention_inv_freq in the model")


def rotary_table(inv_freq):
    """(rotary_dims, the rotary_dims / 2 nonzero leading frequencies as fp32) of a proportional
    RoPE buffer inv_freq [head_dim / 2] (its rotated frequencies first, zeros after). Raises
    ValueError for a buffer of another form."""
    table = inv_freq.detach().float().flatten()
    nonzero = int((table != 0).sum().item())
    if nonzero == 0 or not bool((table[:nonzero] != 0).all()) or not bool((table[nonzero:] == 0).all()):
        raise ValueError("wideattn.v_only_cache: the RoPE buffer is not its rotated frequencies followed by zeros")
    return 2 * nonzero, table[:nonzero].contiguous()


def register_model(model):
    """Records, per global attention module of `model`, what k_from_v_forward needs: k_norm's
    weight (fp32) and the model's RoPE frequencies."""
    rotary_dims, table = rotary_table(_rotary_buffer(model))
    for module in model.modules():
        if getattr(module, "layer_type", None) == FULL_ATTENTION and hasattr(module, "k_norm"):
            weight = module.k_norm.weight.detach().float().contiguous()
            _modules[id(module)] = (weight, table.to(weight.device), rotary_dims)


def is_v_only_call(module, key, value):
    """Whether an attention call comes from a V-only layer's update (key is value) on a module
    register_model recorded."""
    return key is value and id(module) in _modules


def k_from_v_forward(module, query, value, scaling, plan=None):
    """A V-only layer's call: `module` the attention module (register_model recorded it), query
    [B, Hq, T, D] over `value`, the cached V [B, Hkv, S, D] (T <= S, the queries the last T
    positions, causal), K rebuilt from V, `scaling` the softmax scale. `plan`: None (no padding:
    each batch row's keys are its S positions 0 .. S - 1), or per batch row (pad_rows, key_start,
    key_len) as int64 device tensors (wideattn.transformers.mask_plan of the call's mask: left
    padding): row b's keys are its key_len real ones from key_start on, at positions 0 ..
    key_len - 1 (transformers numbers a left-padded row's positions from its first real token),
    and its first pad_rows queries are padding (their outputs zero). Returns the output
    [B, T, Hq, D] bf16. Each row's keys go to pages of their own (PAGE_SLOTS keys a page), so a
    position is an index in its sequence; the layout is made by device ops alone (each row's pages
    at a fixed place, its key count from the plan), and only several queries with a plan read the
    plan's pad_rows on the host (a synchronisation) to pack the real queries. With an e4m3
    layer (v_only_cache(..., e4m3=True)) V is quantised with one scale for the call into an e4m3
    V-only cache first, rounded up to a power of two (in the scale's launch) with the layer's
    power_of_two_scale.
    prefill_k_from_v chooses the path (one query a sequence: the K-from-V decode kernel; more: the
    keys rebuilt into a K + V scratch, then the K + V prefill), given max_seqlen_k so that it reads
    no length from the device."""
    layer_idx = getattr(module, "layer_idx", None)
    e4m3 = _layer_e4m3.get(layer_idx, False)
    power_of_two = _layer_power_of_two.get(layer_idx, False)
    batch, q_heads, q_len, head_dim = query.shape
    _, kv_heads, kv_len, _ = value.shape
    if q_len > kv_len:
        raise NotImplementedError(f"wideattn.v_only_cache: a V-only layer serves at most as many queries as keys, "
                                  f"not {q_len} queries over {kv_len} keys")
    device = query.device
    # Row b's pages are b * pages_per_row ..: its keys (key_start on, or all) from slot 0 on; the
    # copies past its key_len are never read (its key count ends there).
    pages_per_row = -(-kv_len // PAGE_SLOTS)
    positions = torch.arange(kv_len, dtype=torch.int64, device=device)
    rows_index = torch.arange(batch, dtype=torch.int64, device=device)
    if plan is None:
        key_start = torch.zeros(batch, dtype=torch.int64, device=device)
        key_len = torch.full((batch,), kv_len, dtype=torch.int64, device=device)
    else:
        _, key_start, key_len = plan
    source_rows = rows_index[:, None].expand(batch, kv_len).reshape(-1)
    source_keys = (key_start[:, None] + positions[None, :]).clamp(max=kv_len - 1).reshape(-1)
    slots = (rows_index[:, None] * (pages_per_row * PAGE_SLOTS) + positions[None, :]).reshape(-1)
    total_pages = batch * pages_per_row
    table = (rows_index[:, None] * pages_per_row +
             torch.arange(pages_per_row, dtype=torch.int64, device=device)[None, :]).to(torch.int32)
    seq_lens_k = key_len.to(torch.int32)
    # The queries: every row's q_len, or with a plan and several queries each row's real ones (the
    # last q_len - pad_rows: pad_rows read on the host), packed.
    pads = plan[0].tolist() if plan is not None and q_len > 1 else None
    if pads is None:
        cu_seqlens_q = torch.arange(0, (batch + 1) * q_len, q_len, dtype=torch.int32, device=device)
        q = query.transpose(1, 2).reshape(batch * q_len, q_heads, head_dim)
    else:
        cu = [0]
        for pad in pads:
            cu.append(cu[-1] + q_len - pad)
        cu_seqlens_q = torch.tensor(cu, dtype=torch.int32, device=device)
        q = torch.cat([query[b, :, pad:].transpose(0, 1) for b, pad in enumerate(pads)])
    weight, inv_freq, rotary_dims = _modules[id(module)]
    flat = value.transpose(1, 2)[source_rows, source_keys]   # [B * S, Hkv, D]: one gather
    v_scale = None
    if e4m3:
        v_cache = torch.zeros((total_pages, PAGE_SLOTS, kv_heads, head_dim), dtype=torch.uint8, device=device)
        if plan is not None:
            # The scale over each row's real keys only (the copies past key_len are padding).
            real = (positions[None, :] < key_len[:, None]).reshape(-1)
            v_scale = _quantization.compute_scale(flat, torch.where(real, slots, torch.full_like(slots, -1)),
                                                  power_of_two=power_of_two)
        else:
            v_scale = _quantization.compute_scale(flat, power_of_two=power_of_two)
        _quantization.quantize_to_cache(flat, v_cache, slots, v_scale)
    else:
        v_cache = torch.zeros((total_pages * PAGE_SLOTS, kv_heads, head_dim), dtype=value.dtype, device=device)
        v_cache.index_copy_(0, slots, flat)
        v_cache = v_cache.view(total_pages, PAGE_SLOTS, kv_heads, head_dim)
    out = _attention.prefill_k_from_v(q.contiguous(), v_cache, cu_seqlens_q, seq_lens_k, table, scaling, weight,
                                      rotary_dims, inv_freq=inv_freq, v_scale=v_scale, max_seqlen_q=q_len,
                                      max_seqlen_k=kv_len)
    calls["k_from_v"] += 1
    if pads is None:
        return out.view(batch, q_len, q_heads, head_dim)
    result = torch.zeros((batch, q_len, q_heads, head_dim), dtype=out.dtype, device=device)
    for b, pad in enumerate(pads):
        result[b, pad:] = out[cu[b]:cu[b + 1]]
    return result


def cache_bytes(cache, layers=None):
    """Bytes of the K and V tensors a transformers cache holds in `layers` (default: all)."""
    total = 0
    for i, layer in enumerate(cache.layers):
        if layers is not None and i not in layers:
            continue
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total
