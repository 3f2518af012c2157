"""transformers integration: `wideattn.transformers.register()` adds the attention function
"wideattn" (and "paged|wideattn" for continuous batching) to transformers.AttentionInterface and
the SDPA mask format under "wideattn" to AttentionMaskInterface, so that

    model = Gemma4ForCausalLM(config)                    # or from_pretrained(...)
    model.set_attn_implementation("wideattn")            # or attn_implementation="wideattn"

runs the layers wideattn serves (bf16 on CUDA, a head dim and GQA group of the bundle's bf16
kernels: Gemma 4's 512-dim global layers; causal, no sliding window, no softcap, no dropout, no
gradient) on the `wideattn::prefill` op and hands every other layer (Gemma 4's 256-dim sliding
layers, training, ...) to transformers' SDPA function.

Two call shapes reach attention_forward (checked against transformers' source up to 5.16.0.dev0,
commit 3cd1a2307acd of 2026-08-21: modeling_gemma4.py, masking_utils.py,
integrations/sdpa_attention.py and sdpa_paged.py, generation/continuous_batching/):
  - ordinary forward (generate with a DynamicCache/StaticCache, or no cache): query
    [B, Hq, T, D], key/value [B, Hkv, S, D] (S = cached + new keys) and the 4-D SDPA mask. The mask
    is read as "keys start_b .. end_b-1 of batch row b, causal bottom-right" (left padding, a
    static cache's unused tail); no mask means what transformers' SDPA function makes of it:
    causal over all S keys for T == 1 or T == S, causal over the first T keys for T > 1 and
    S > T (the prefill of an empty static cache, where sdpa_mask skips the mask). K/V are
    described as token-row pages of the cache tensors (no copy), padded query rows become a
    separate sequence and their outputs are zeroed. A mask not of that pattern goes to SDPA;
    which masks are verified on the host, and where, is the rule under "Masks" below.
  - continuous batching (generate_batch on a "paged|wideattn" model): kwargs carry transformers'
    PagedAttentionCache (`cache`) and packed metadata (cu_seq_lens_q/k, max_seqlen_q/k,
    read_index, write_index: one index tensor per layer group). The new K/V go into
    transformers' own paged cache through cache.update(), which returns the sequences' keys as
    dense rows [total_k, Hkv, D]; the op reads them through token-row pages (varlen). transformers
    builds no attention mask for a paged implementation other than paged|sdpa and paged|eager, so
    a paged call wideattn does not serve (a sliding layer) gets the packed causal (sliding-window)
    mask built here from the metadata, on the device, and runs on transformers' SDPA function.
Ordinary forward: the global layers of one forward step share one StepMetadata (the mask read
once, the varlen tensors built once), so the op's plan cache (ops.PlanCache) runs one plan, made
at the step's first global layer, for all of them; a continuous-batching step shares its metadata
the same way (paged_step_metadata).

Plan reuse across decode steps (on by default since 2026-12-03, after its GPU runs; off with
set_decode_reuse(False) or $WIDEATTN_DECODE_REUSE=0). A decode step (one query token per batch
row, outside debug mode, torch.compile and CUDA-graph capture) keeps the op's plan key of the step
before, so the plan cache makes a plan only when a capacity is passed (a new plan per step cost
~50 us per layer before):
  - each (batch row, KV head) is a sequence pair of its own over one KV head (_decode_forward):
    query rows [B * Hkv, group, D], K/V as token-row pages with no head stride, since a
    DynamicCache's K/V [B, Hkv, S, D] are a new exact tensor per step (torch.cat) whose head
    stride S * D changes with S; the K/V bases are what each plan run receives, never in the key;
  - the step's cu_seqlens_q, seq_lens_k and block table live in the persistent buffers of
    decode_buffers() (StepBuffers, per device, stream and thread; grown geometrically), written
    once per step, and only what changed: without a mask cu_seqlens_q and the block table depend
    on the layout alone (the table's entries clamped below the layout's row count, not the key
    count), so a step of the same layout writes the key counts only (one device fill_), a step
    whose rows only grew shifts the table in place (below), and any other new layout writes the
    whole buffer by one host-to-device copy from a ring of pinned staging buffers, each reused
    only after the CUDA event of its last copy; key ranges read from a mask by device ops into
    the same buffers. Same pointers from step to step;
  - the max_seqlen_k hint and the block table's width are key_capacity(S) (powers of two to 4096,
    then multiples of 4096), which only caps the split count (any hint is correct);
  - the layout's row count is the rows up to the end of the storage for a view into a larger one
    (a static cache), else row_capacity(rows) (at most 1/8 more than the tensor has, so that a
    thousand steps at 8k context share it). Those extra rows are never read (the block-table
    entries a sequence uses name rows of the tensor only), but the library refuses a run whose
    output lies in them (its overlap rule): that call runs once more with the exact count
    (decode_reuse counts it). A DynamicCache's row layout (its head and batch strides) grows every
    step: its steps shift the block table in place by device ops (every row start moves up by a
    multiple of the growth, entries clamped as a full write clamps them) and fill the key counts,
    and write the whole buffer only when a capacity or the shape changes (or the rows shrink); a
    static cache's steps write the key counts only;
  - on CUDA with the Python op, a decode layer runs its cached plan without torch's dispatcher
    (ops._run_cached_plan, the op's own path after its capture and debug checks, which the layer
    has made); with the C++ op loaded (wideattn.cpp_ops) it calls that op.
An eager step is host-bound at batch 1 (a Gemma 4 31B decode step at 8k: ~70 ms of host time
against ~37 ms of GPU work, BENCHMARKS.md 2026-12-06), so the host time per layer is the step's:
a sliding-window call (not paged) goes to SDPA before anything else is read.
Prefill and chunked steps (T > 1), debug mode and traced or captured steps build the step's
metadata as new tensors (step_metadata) with the exact row count and hints.
Both pass the op host-side length hints (max_seqlen_q / max_seqlen_k: the query and key lengths
of the call, or the continuous-batching metadata's) for its split-KV choice; no device tensor is
read for them, so decode steps stay capturable in CUDA graphs.

Masks. The kernels implement causal attention over a key range per batch row; a mask of another
form run on them would give wrong outputs without an error, which is worse than a slow call, so
a mask is either of that form by construction or verified on the host (a device-to-host read: one
synchronisation) before any layer runs on its reading. The rule (MASK_CHECK_AUTO, the default):
  - No mask: the reading follows from the shapes (above); nothing is read.
  - A mask built by build_mask (the SDPA mask format register() installs under "wideattn", which
    transformers' create_causal_mask calls once per step) from transformers' plain causal mask
    function, with no padding mask, no local window and host-int offsets that place the queries
    at the end of the keys (a chunked prefill or a decode step over a cache without padding): of
    the form by construction; its key ranges are read on the device, nothing is verified.
  - A mask build_mask builds with a padding mask, or with offsets on the device (a StaticCache's
    sequence length) or of unknown names (transformers before 5.14): verified once, in build_mask,
    at the start of the step, where the device has the least queued work for the host to wait for;
    the reading (or the verdict that it goes to SDPA) is attached to the mask and used by the step's
    served layers.
  - Any other mask (a 4-D mask the caller passed, one of another mask function, one changed in
    place after build_mask read it: its version counter moved, or of other shapes than the call's):
    verified at the step's first served layer and shared by the step's other layers.
  - Under torch.compile or CUDA-graph capture nothing is read on the host: a mask without an
    attached reading is read on the device unverified (a host read cannot be traced or captured).
  - Debug mode (wideattn.set_debug(True), $WIDEATTN_DEBUG=1): every mask is verified at every
    served call, whatever its origin, and no metadata is shared between layers.
set_mask_check(MASK_CHECK_PER_STEP) restores the earlier rule (every mask verified at the first
served layer of each step; build_mask attaches nothing), so the two can be timed in one process.

V-only caches (K from V): wideattn.v_only_cache.v_only_cache(model) makes a DynamicCache whose
Gemma 4 global layers keep V alone; their calls after the first reach attention_forward with the
cached V as both key and value and run on wideattn.prefill_k_from_v (that module's docstring).

Host synchronisations on the per-step path: only the mask verifications above (_matches, one
bool() of a device flag). Nothing else reads device data on the host: the hints are host ints (a
continuous-batching max_seqlen_k that is not one is replaced by the key row count, which bounds
it), the metadata is built with device ops, and the op launches without reading its tensors.
"""

import logging
import math
import threading

import torch

from . import attention as _attention
from . import errors
from . import ops as _ops
from . import v_only_cache as _v_only
from .library import _debug, default_context, switch_from_env

NAME = "wideattn"
PAGED_PREFIX = "paged|"
FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
SDPA = "sdpa"
# Keyword arguments of a continuous-batching call that belong to the paged cache, not to SDPA.
PAGED_ONLY_KWARGS = ("cache", "read_index", "write_index")
# Tests only: True runs CPU tensors through the op's CPU (reference) implementation instead of
# handing them to SDPA.
CPU_REFERENCE = False

_log = logging.getLogger(__name__)
_served = {}
_warned = set()
# Calls per path since import: "dense" and "paged" ran on wideattn, "k_from_v" over a V-only
# cache layer (wideattn.v_only_cache), "sdpa" were handed over.
calls = {"dense": 0, "paged": 0, "k_from_v": 0, "sdpa": 0}


def register(name=NAME):
    """Registers the attention function under `name` and "paged|" + name, and the SDPA mask format
    under `name`. "paged|" + name gets no mask function, as transformers' own paged functions
    have none: the model then builds no mask for a continuous-batching step. Raises ImportError
    (the failed import as its __cause__) where transformers cannot be imported."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, causal_mask_function, sdpa_mask
    except ImportError as error:
        raise ImportError(f"wideattn.transformers.register: wideattn.transformers needs transformers "
                          f"(AttentionInterface and masking_utils; docs/integration.md section 4): {error}") from error
    _mask_source.update(sdpa_mask=sdpa_mask, causal=causal_mask_function)
    AttentionInterface.register(name, attention_forward)
    AttentionInterface.register(PAGED_PREFIX + name, attention_forward)
    AttentionMaskInterface.register(name, build_mask)
    return name


# How masks are checked against the kernels' reading (module docstring, "Masks"): MASK_CHECK_AUTO
# (the default) verifies on the host only masks whose form does not follow from host values, once,
# where transformers builds them; MASK_CHECK_PER_STEP verifies every mask at the first served layer
# of each step (the earlier rule, kept to time the two against each other).
MASK_CHECK_AUTO = "auto"
MASK_CHECK_PER_STEP = "per_step"
MASK_CHECKS = (MASK_CHECK_AUTO, MASK_CHECK_PER_STEP)
_mask_check = {"mode": MASK_CHECK_AUTO}
# What build_mask wraps: transformers' sdpa_mask and its plain causal mask function (set by register()).
_mask_source = {"sdpa_mask": None, "causal": None}
# The attribute build_mask sets on a mask it read: (the mask's version counter then, mask_plan's result).
READING_ATTRIBUTE = "_wideattn_reading"
# Masks read (and, where their form does not follow from host values, verified) by build_mask (tests).
mask_reads = {"derived": 0, "verified": 0}


def set_mask_check(mode):
    """Sets how masks are checked: `mode` MASK_CHECK_AUTO ("auto", the default) or
    MASK_CHECK_PER_STEP ("per_step", every mask verified on the host at the first served layer of
    each step); returns the previous mode. Debug mode (wideattn.set_debug) verifies every mask at
    every served call whatever the mode."""
    if mode not in MASK_CHECKS:
        raise ValueError(f"wideattn.transformers.set_mask_check: mode={mode!r}; expected one of {MASK_CHECKS}")
    previous = _mask_check["mode"]
    _mask_check["mode"] = mode
    return previous


# Plan reuse across decode steps (module docstring, "Plan reuse across decode steps"): on by
# default. It states a DynamicCache's K/V with up to 1/8 more rows than the tensor has (rows the
# block table never names, so never read), which the library's extent and overlap checks then
# treat as cache. GPU runs measured it before it became the default (BENCHMARKS.md, 2026-12-03:
# Gemma 4's greedy tokens identical with and without it, no exact-count retry in 126 per-head
# calls; at decode_8k wideattn ran at 0.96-1.06x SDPA's speed with it, 0.87-0.96x without).
# Off with set_decode_reuse(False) or $WIDEATTN_DECODE_REUSE=0.
ENV_DECODE_REUSE = "WIDEATTN_DECODE_REUSE"
_decode_reuse = {"on": switch_from_env(ENV_DECODE_REUSE, "plan reuse across decode steps", default=True)}


def set_decode_reuse(on):
    """Turns plan reuse across decode steps on or off (`on`: bool; default on, or off with
    $WIDEATTN_DECODE_REUSE=0); returns the previous setting."""
    if not isinstance(on, bool):
        raise TypeError(f"wideattn.transformers.set_decode_reuse: on={on!r}; expected a bool")
    previous = _decode_reuse["on"]
    _decode_reuse["on"] = on
    return previous


def _host_offsets_fit(kwargs):
    """Whether sdpa_mask's keyword arguments place the queries at the end of the keys in host ints:
    kv_offset <= q_offset and q_offset + q_length <= kv_offset + kv_length (transformers >= 5.14's
    names; older versions pass cache_position, a device tensor, and so never fit)."""
    values = [kwargs.get(n) for n in ("q_offset", "kv_offset", "q_length", "kv_length")]
    if any(type(v) is not int for v in values):
        return False
    q_offset, kv_offset, q_length, kv_length = values
    return kv_offset <= q_offset and q_offset + q_length <= kv_offset + kv_length


def build_mask(*args, **kwargs):
    """The SDPA mask format registered under "wideattn": transformers' sdpa_mask called with `args`
    and `kwargs` as transformers' mask creation passes them (returns its result), which also reads
    a causal mask as the kernels take it (mask_plan) and attaches the reading to it, so the step's
    served layers neither read nor verify it again. A mask of transformers' plain causal mask function
    with no padding mask, no local window and host-int offsets that place the queries at the end
    of the keys has the kernels' form by construction: read on the device, not verified. One with a
    padding mask (or offsets on the device) is verified here, with one host synchronisation at the
    start of the step, where the device has the least queued work to wait for. Other masks
    (sliding windows, overlays: the layers wideattn does not serve, or masks it must verify per step),
    masks under torch.compile or CUDA-graph capture, and every mask in debug mode or with
    MASK_CHECK_PER_STEP are returned as built, with nothing attached."""
    mask = _mask_source["sdpa_mask"](*args, **kwargs)
    if (isinstance(mask, torch.Tensor) and mask.dim() == 4 and mask.shape[1] == 1
            and kwargs.get("mask_function") is _mask_source["causal"] and kwargs.get("local_size") is None
            and _mask_check["mode"] == MASK_CHECK_AUTO and not _debug["on"]
            and not _capturing_or_compiling(mask.device)):
        derived = kwargs.get("attention_mask") is None and _host_offsets_fit(kwargs)
        batch, _, q_len, kv_len = mask.shape
        plan = mask_plan(mask, batch, q_len, kv_len, mask.device, verify=not derived)
        mask_reads["derived" if derived else "verified"] += 1
        setattr(mask, READING_ATTRIBUTE, (mask._version, plan))
    return mask


def attached_reading(attention_mask, batch, q_len, kv_len):
    """(True, mask_plan's result) for an attention_mask build_mask read, of the call's B, T and S
    (batch, q_len, kv_len) and left unchanged since (its version counter); (False, None) for any
    other mask, which the caller reads and verifies itself."""
    reading = getattr(attention_mask, READING_ATTRIBUTE, None)
    if reading is None or reading[0] != attention_mask._version or attention_mask.shape != (batch, 1, q_len, kv_len):
        return False, None
    return True, reading[1]


def mask_reading(attention_mask, batch, q_len, kv_len, device, verify=True, debug=False):
    """mask_plan's reading of attention_mask for the call's B, T and S (batch, q_len, kv_len): the
    one build_mask attached to it where the mask rule allows (MASK_CHECK_AUTO, not `debug`), else
    read here on `device` (verified when `verify`; no mask: what the shapes give)."""
    if attention_mask is not None and _mask_check["mode"] == MASK_CHECK_AUTO and not debug:
        attached, plan = attached_reading(attention_mask, batch, q_len, kv_len)
        if attached:
            return plan
    return mask_plan(attention_mask, batch, q_len, kv_len, device, verify)


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        _log.warning(message)


_attention_functions = {"registry": None}


def _fallback():
    """transformers' SDPA function (integrations/sdpa_attention.py: sdpa_attention_forward), looked
    up in transformers' registry at each call (imported once)."""
    registry = _attention_functions["registry"]
    if registry is None:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        registry = _attention_functions["registry"] = ALL_ATTENTION_FUNCTIONS
    return registry[SDPA]


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
    AttentionInterface kwargs goes to SDPA instead (None: wideattn runs it). The most frequent
    refusal (Gemma 4's sliding layers: five in six) is tested first."""
    if kwargs.get("sliding_window") is not None:
        return "a sliding window"
    if not query.is_cuda and not (CPU_REFERENCE and query.device.type == "cpu"):
        return f"tensors on {query.device}"
    bf16 = torch.bfloat16
    if query.dtype is not bf16 or key.dtype is not bf16 or value.dtype is not bf16:
        return f"dtype {query.dtype}/{key.dtype}/{value.dtype}"
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
    q_shape, k_shape, v_shape = query.shape, key.shape, value.shape
    if v_shape[-1] != q_shape[-1] or k_shape[1] != v_shape[1] or q_shape[1] % k_shape[1]:
        return "unequal head dims or heads"
    if not served_shape(q_shape[-1], q_shape[1] // k_shape[1]):
        return f"head_dim {q_shape[-1]}, group {q_shape[1] // k_shape[1]} not in the bundle"
    return None


def attention_forward(module, query, key, value, attention_mask, **kwargs):
    """The AttentionInterface function: `module` the attention layer, query [B, Hq, T, D], key /
    value [B, Hkv, S, D], attention_mask in SDPA format (or None), kwargs transformers' (scaling,
    sliding_window, the paged cache and its metadata, ...). Returns (attn_output [B, T, Hq, D],
    None); a call wideattn does not serve goes to SDPA."""
    paged = is_paged_call(kwargs)
    if not paged and kwargs.get("sliding_window") is not None:
        # Gemma 4's sliding layers (five calls in six; never V-only: register_model records full-
        # attention layers only) go to SDPA before anything else is read: at a host-bound decode
        # step every microsecond here is one of the step's.
        calls["sdpa"] += 1
        return _fallback()(module, query, key, value, attention_mask, **kwargs)
    scaling = kwargs.get("scaling")
    scaling = float(scaling) if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    if not paged and _v_only.is_v_only_call(module, key, value):
        # A V-only cache layer's call (wideattn.v_only_cache): K exists only as V's function, so
        # it never goes to SDPA.
        calls["k_from_v"] += 1
        return _v_only.k_from_v_forward(module, query, value, scaling, v_only_rows(attention_mask, query, value)), None
    if paged and kwargs.get("block_table") is not None:
        raise NotImplementedError("wideattn.transformers: a continuous-batching call with a block_table "
                                  "(transformers' flash_attn_with_kvcache decode path) is not supported")
    result = None
    if unserved_reason(module, query, key, value, kwargs) is None:
        if paged:
            result = _paged_forward(module, query, key, value, scaling, kwargs)
        else:
            result = _dense_forward(query, key, value, attention_mask, scaling)
    if result is None:
        calls["sdpa"] += 1
        if paged:
            return _paged_fallback(module, query, key, value, kwargs)
        return _fallback()(module, query, key, value, attention_mask, **kwargs)
    calls["paged" if paged else "dense"] += 1
    return result, None


def v_only_rows(attention_mask, query, value):
    """A V-only call's rows for v_only_cache.k_from_v_forward, from `attention_mask` (the call's, in
    SDPA format, a 2-D padding mask or None) and the shapes of `query` [B, Hq, T, D] and `value`
    [B, Hkv, S, D]: None without a mask, else mask_plan's (pad_rows, key_start, key_len) per batch
    row as device tensors (the reading build_mask attached, else the mask read and verified here,
    one synchronisation). Raises NotImplementedError for a mask other than causal with left
    padding (K from V needs each key's position, which such a mask does not give)."""
    batch, _, q_len, _ = query.shape
    kv_len = value.shape[2]
    if attention_mask is None:
        return None
    plan = mask_reading(attention_mask, batch, q_len, kv_len, query.device, True, _debug["on"])
    if plan is None:
        raise NotImplementedError("wideattn.v_only_cache: a V-only layer serves causal masks with left padding "
                                  "only (K is rebuilt at each key's position in its row)")
    return plan


def is_paged_call(kwargs):
    """Whether the call's kwargs make it a continuous-batching call: a paged cache object with
    update() and packed metadata."""
    cache = kwargs.get("cache")
    return cache is not None and hasattr(cache, "update") and (
        "cu_seq_lens_q" in kwargs or "cumulative_seqlens_q" in kwargs)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)   # torch >= 2.1


def _capturing_or_compiling(device):
    """Whether torch.compile is tracing or the current stream of a CUDA `device` is capturing."""
    if _is_compiling is not None and _is_compiling():
        return True
    return device.type == "cuda" and _ops._stream_capturing()


# Host verifications of masks (_matches) since import (tests and benchmarks count them).
verifications = {"count": 0}


def mask_plan(attention_mask, batch, q_len, kv_len, device, verify=True):
    """(pad_rows, key_start, key_len) per batch row as int64 device tensors, from attention_mask:
    an SDPA-format mask (bool [B|1, 1, T, S], or additive float), a 2-D padding mask [B, S], or
    None (what transformers' SDPA function makes of no mask: causal, no padding, over the first T
    keys when T > 1 and S > T, else over all S); None when the mask is not causal-with-a-key-range
    (verified when `verify`). batch, q_len and kv_len are the call's B, T and S; the tensors are
    made on `device`."""
    if attention_mask is None:
        zeros = torch.zeros(batch, dtype=torch.int64, device=device)
        keys = min(q_len, kv_len) if q_len > 1 else kv_len
        return zeros, zeros, torch.full((batch,), keys, dtype=torch.int64, device=device)
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
    """The one host synchronisation of the ordinary-forward path (module docstring, "Masks"):
    whether every valid query row allows exactly keys start .. end - T + i, every row of the batch
    has a key, and an additive mask holds only 0 and large negatives."""
    verifications["count"] += 1
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



class StepMetadata:
    """The op's metadata of one forward step's served layers: the mask read once (and verified
    where the module docstring's "Masks" says), the varlen tensors built once, so every global layer of the step
    passes the same tensors and the op's plan cache runs one plan for all of them. pad_rows
    (int64 [B]) the padded query rows per batch row; cu_seqlens_q, seq_lens_k and block_table the
    op's int32 metadata of the 2B sequences (padding, then real rows, per batch row) over the
    token-row pages of the K/V rows; padded the bool [B, T] of padded query rows (None without a
    mask)."""

    def __init__(self, pad_rows, cu_seqlens_q, seq_lens_k, block_table, padded):
        self.pad_rows = pad_rows
        self.cu_seqlens_q = cu_seqlens_q
        self.seq_lens_k = seq_lens_k
        self.block_table = block_table
        self.padded = padded


# The last forward step's metadata: (key, the mask it was read from, StepMetadata or None).
_step = {"entry": None}
# Steps whose metadata was built (tests; a forward step of a model builds one).
step_builds = {"count": 0}


def step_metadata(attention_mask, batch, q_len, kv_len, rows_per_batch, device, verify):
    """The StepMetadata of a served call (None: the mask is not causal with a key range), shared
    by the calls of one forward step. attention_mask, batch, q_len, kv_len and device as
    mask_plan takes them (the call's mask, B, T and S); rows_per_batch the K/V rows between two
    batch entries; verify whether a mask without a reading attached by build_mask is verified
    (mask_plan), which callers set False under torch.compile and CUDA-graph capture (then nothing is
    read on the host, nor shared, as a traced or captured step cannot rely on it). The last step's metadata is
    reused for the same mask tensor (held, so its identity cannot be reused; its version counter
    catches an in-place change) or no mask, and the same B, T, S, row layout and device; it is
    built anew under torch.compile and CUDA-graph capture, and at every call in debug mode (where
    every mask is verified, attached reading or not)."""
    key = (None if attention_mask is None else (id(attention_mask), attention_mask._version),
           batch, q_len, kv_len, rows_per_batch, device, verify)
    debug = _debug["on"]
    shared = verify and not debug
    entry = _step["entry"]
    if shared and entry is not None and entry[0] == key and entry[1] is attention_mask:
        return entry[2]
    plan = mask_reading(attention_mask, batch, q_len, kv_len, device, verify, debug)
    metadata = None
    if plan is not None:
        pad_rows, key_start, key_len = plan
        num_rows = (batch - 1) * rows_per_batch + kv_len
        batch_rows = torch.arange(batch, device=device) * rows_per_batch
        # Sequence 2b: batch row b's padded query rows over its first keys (finite, zeroed below);
        # sequence 2b+1: its real query rows over keys key_start .. key_start + key_len - 1.
        q_lens = torch.stack([pad_rows, q_len - pad_rows], dim=1).reshape(-1)
        cu_seqlens_q = torch.cat([q_lens.new_zeros(1), torch.cumsum(q_lens, 0)]).to(torch.int32)
        seq_lens_k = torch.stack([pad_rows, key_len], dim=1).reshape(-1).to(torch.int32)
        row_start = torch.stack([batch_rows, batch_rows + key_start], dim=1).reshape(-1)
        block_table = _attention.token_row_block_table(row_start, kv_len, num_rows)
        padded = None
        if attention_mask is not None:
            padded = torch.arange(q_len, device=device)[None, :] < pad_rows[:, None]
        metadata = StepMetadata(pad_rows, cu_seqlens_q, seq_lens_k, block_table, padded)
    step_builds["count"] += 1
    if shared:
        _step["entry"] = (key, attention_mask, metadata)
    return metadata


STAGING_SLOTS = 4             # pinned host staging buffers per StepBuffers, used in turn
_SECTION = 16                 # int32 entries: the metadata sections start 64 bytes apart at least


def _round_section(n):
    return -(-n // _SECTION) * _SECTION


class StepBuffers:
    """The persistent metadata of the decode steps on one device, stream and thread (decode_buffers):
    one int32 device buffer holding cu_seqlens_q, seq_lens_k and the block table of a step at fixed
    offsets, so that consecutive steps pass the same pointers (and the op's plan cache runs the plan
    made at an earlier step); grown geometrically (a new pointer: a new plan) when a step needs more.
    A step whose values are host ints (no mask) writes only what changed since the buffer's last
    no-mask write (`written`: its layout and key count): the key count of the real queries'
    sequences (one device fill_) where the layout is the same, as cu_seqlens_q and the block table
    depend on the layout alone; that and the block table shifted in place by device ops where only
    the rows grew (a DynamicCache one key longer: _grown_rows); else (another batch, capacity or
    row count, rows that shrank) the whole buffer by one host-to-device copy from a pinned staging
    buffer of a ring of STAGING_SLOTS, each with a CUDA event recorded after its copy (a slot is
    written again only once its previous copy has completed, event.synchronize(), long done by
    then). A step whose key ranges are on the device (a mask's reading) is written by device ops
    (and forgets `written`). Each is queued on the stream after the previous step's launches,
    which read the old values."""

    def __init__(self, device):
        self.device = device
        self.buffer = None
        self.slots = [[None, None] for _ in range(STAGING_SLOTS)]
        self.next_slot = 0
        self.steps = {}
        # The no-mask step the buffer holds: ((num_seqs, pages, batch, kv_heads, rows_per_batch,
        # head_rows, last_row), kv_len), and the view of its real queries' key counts; None after a
        # device-written step or a regrowth.
        self.written = None
        self.real_lens = None
        self.indices = {}
        # Steps whose table was shifted in place (decode_metadata) rather than written (tests).
        self.shifted = 0

    def views(self, num_seqs, pages):
        """(cu_seqlens_q, seq_lens_k, block_table, (seq_offset, table_offset, entries)): views of
        the device buffer (grown to fit) for num_seqs sequences and `pages` table entries per
        sequence, the offsets of the last two and the buffer's entries they span."""
        seq_offset = _round_section(num_seqs + 1)
        table_offset = seq_offset + _round_section(num_seqs)
        entries = table_offset + num_seqs * pages
        buffer = self.buffer
        if buffer is None or buffer.numel() < entries:
            size = max(4096, 1 << (entries - 1).bit_length(), 2 * (0 if buffer is None else buffer.numel()))
            buffer = self.buffer = torch.empty(size, dtype=torch.int32, device=self.device)
            self.written = self.real_lens = None
        return (buffer[:num_seqs + 1], buffer[seq_offset:seq_offset + num_seqs],
                buffer[table_offset:entries].view(num_seqs, pages), (seq_offset, table_offset, entries))

    def index_column(self, n, axis, device):
        """int32 0 .. n - 1 on `device`, shaped [n, 1, 1] (axis 0) or [1, n, 1] (axis 1) to
        broadcast over a [batch, kv_heads, entries] view of the block table (cached)."""
        key = (n, axis, device)
        column = self.indices.get(key)
        if column is None:
            column = torch.arange(n, dtype=torch.int32, device=device).view((n, 1, 1) if axis == 0 else (1, n, 1))
            if len(self.indices) >= 8:
                self.indices.clear()
            self.indices[key] = column
        return column

    def page_steps(self, pages, device):
        """int32 [pages]: 0, 16, 32, .. (cached per page count and device)."""
        steps = self.steps.get((pages, device))
        if steps is None:
            steps = torch.arange(pages, dtype=torch.int32, device=device) * _ops.TOKEN_ROW_PAGE
            if len(self.steps) >= 4:
                self.steps.clear()
            self.steps[(pages, device)] = steps
        return steps

    def write_host(self, entries, fill):
        """Writes the buffer's first `entries` values: fill(host) writes them into `host`, an int32
        CPU tensor of `entries` values (pinned staging for a CUDA buffer, the buffer itself on the
        CPU); a CUDA buffer then gets them by one non-blocking copy on the current stream."""
        if self.device.type != "cuda":
            fill(self.buffer[:entries])
            return
        slot = self.slots[self.next_slot]
        self.next_slot = (self.next_slot + 1) % STAGING_SLOTS
        staging, event = slot
        if event is None:
            event = slot[1] = torch.cuda.Event()
        else:
            event.synchronize()        # its previous copy has completed: the slot may be rewritten
        if staging is None or staging.numel() < entries:
            staging = slot[0] = torch.empty(max(4096, 1 << (entries - 1).bit_length()), dtype=torch.int32,
                                            pin_memory=True)
        fill(staging[:entries])
        self.buffer[:entries].copy_(staging[:entries], non_blocking=True)
        event.record(torch.cuda.current_stream(self.device))


# StepBuffers by (device, stream, thread): a step's buffers are written on the stream its layers
# launch on, so a layer never reads what another stream or thread writes for its own step.
_decode_buffers = {}


def decode_buffers(device):
    """The StepBuffers of `device`, its current stream and the calling thread."""
    stream = _ops.current_stream(device) if device.type == "cuda" else None
    key = (device, stream, threading.get_ident())
    buffers = _decode_buffers.get(key)
    if buffers is None:
        buffers = _decode_buffers[key] = StepBuffers(device)
    return buffers


# The largest block-table entry an in-place shift may form before its clamp (int32).
_INT32_MAX = (1 << 31) - 1


def _grown_rows(old, new):
    """(rows_per_batch growth, head_rows growth) when the no-mask layout `new` differs from `old`
    (decode_metadata's layout tuples) only by rows that grew (a DynamicCache one key longer: its
    head stride and batch stride grow with the keys), so that the block table of `old` plus b x
    the first and h x the second at (batch row b, KV head h), clamped to last_row, is `new`'s table
    entry for entry: an entry clamped before is clamped again (it only grows), one that was not
    becomes its new value or the clamp. None otherwise (another shape or row count, rows that
    shrank, or entries that could pass int32 before the clamp)."""
    num_seqs, pages, batch, kv_heads, rows_per_batch, head_rows, last_row = new
    if old[:4] != new[:4] or old[6] != last_row:
        return None
    grow_batch, grow_head = rows_per_batch - old[4], head_rows - old[5]
    if grow_batch < 0 or grow_head < 0 or last_row + (batch - 1) * grow_batch + (kv_heads - 1) * grow_head > _INT32_MAX:
        return None
    return grow_batch, grow_head


def _fill_decode_layout(host, buffers, offsets, num_seqs, pages, kv_len, batch, kv_heads, rows_per_batch, head_rows,
                        last_row):
    """Writes a no-mask decode step's metadata into `host` (int32 CPU, the buffer's first entries;
    offsets = (seq_offset, table_offset, entries) of StepBuffers.views): cu_seqlens_q 0, 0, 1, 1, ..
    (pair r: the padded query, none, then the real one), seq_lens_k 0, kv_len per pair, and row
    (b * rows_per_batch + h * head_rows) + 16 p, clamped to last_row, at page p of both sequences of
    pair (b, h). A DynamicCache's steps shift the table in place instead (decode_metadata), so this
    runs once per layout: at a generation's first step and when a capacity changes."""
    seq_offset, table_offset, entries = offsets
    cu, lens = host[:num_seqs + 1], host[seq_offset:seq_offset + num_seqs]
    table = host[table_offset:entries].view(num_seqs, pages)
    torch.arange(num_seqs + 1, dtype=torch.int32, out=cu).floor_divide_(2)
    pairs = lens.view(-1, 2)
    pairs[:, 0].fill_(0)
    pairs[:, 1].fill_(kv_len)
    heads = (torch.arange(batch, dtype=torch.int32)[:, None] * rows_per_batch +
             torch.arange(kv_heads, dtype=torch.int32)[None, :] * head_rows).reshape(-1, 1, 1)
    torch.add(heads.expand(-1, 2, 1), buffers.page_steps(pages, host.device)[None, None, :],
              out=table.view(-1, 2, pages)).clamp_(max=last_row)


# The last decode step's metadata: (key, the mask it was read from, StepMetadata or None).
_decode_step = {"entry": None}


def decode_metadata(attention_mask, batch, kv_len, kv_heads, rows_per_batch, head_rows, num_blocks, capacity, device,
                    stream):
    """The StepMetadata of a served decode call (one query per batch row; attention_mask, batch,
    kv_len and device as step_metadata takes them, with q_len 1) in _decode_forward's form, shared
    by the calls of one forward step as step_metadata's is (the same reuse rule, keyed also by the
    row layout, the capacity, the row count, the stream and the thread), written into the
    persistent buffers of decode_buffers(device): sequences 2r and 2r+1 for r = b * kv_heads + h
    (batch row b, KV head h) are the row's padded query (over its first keys) and its real query
    over keys key_start .. key_start + key_len - 1 of head h's rows, which start at row
    b * rows_per_batch + h * head_rows; the block table has capacity / 16 pages per sequence,
    entries clamped below num_blocks (the layout's row count: the entries a sequence uses name rows
    before its last key, so the clamp changes only entries it never reads, and the table stays the
    same from step to step while the layout does). None: the mask is not causal with a key range.
    Callers run it outside torch.compile, CUDA-graph capture and debug mode (where step_metadata
    builds anew). `stream`: the raw current stream of the CUDA device (the caller's, read once for
    its plan run too); None on the CPU."""
    key = (None if attention_mask is None else (id(attention_mask), attention_mask._version), batch, kv_len,
           kv_heads, rows_per_batch, head_rows, num_blocks, capacity, device, stream, threading.get_ident())
    entry = _decode_step["entry"]
    if entry is not None and entry[0] == key and entry[1] is attention_mask:
        return entry[2]
    plan = None
    if attention_mask is not None:
        plan = mask_reading(attention_mask, batch, 1, kv_len, device)
        if plan is None:
            _decode_step["entry"] = (key, attention_mask, None)
            step_builds["count"] += 1
            return None
    buffers = decode_buffers(device)
    num_seqs = 2 * batch * kv_heads
    pages = capacity // _ops.TOKEN_ROW_PAGE
    cu_seqlens_q, seq_lens_k, block_table, (seq_offset, table_offset, entries) = buffers.views(num_seqs, pages)
    last_row = max(num_blocks - 1, 0)
    padded = None
    if plan is None:
        # No mask: no padding, every query over all kv_len keys; host values.
        layout = (num_seqs, pages, batch, kv_heads, rows_per_batch, head_rows, last_row)
        written = buffers.written
        shift = None if written is None else _grown_rows(written[0], layout)
        if written is not None and written[0] == layout:
            # The same layout: cu_seqlens_q and the block table are in place; the key counts, one fill.
            if written[1] != kv_len:
                buffers.real_lens.fill_(kv_len)
                buffers.written = (layout, kv_len)
        elif shift is not None:
            # The rows of each (batch row, KV head) moved up (a DynamicCache one key longer): the
            # table shifted in place by device ops, the key counts filled; no host write.
            table = block_table.view(batch, kv_heads, 2 * pages)
            if shift[0]:
                table.add_(buffers.index_column(batch, 0, device), alpha=shift[0])
            if shift[1]:
                table.add_(buffers.index_column(kv_heads, 1, device), alpha=shift[1])
            table.clamp_(max=last_row)
            if written[1] != kv_len:
                buffers.real_lens.fill_(kv_len)
            buffers.written = (layout, kv_len)
            buffers.shifted += 1
        else:
            def fill(host):
                _fill_decode_layout(host, buffers, (seq_offset, table_offset, entries), num_seqs, pages, kv_len,
                                    batch, kv_heads, rows_per_batch, head_rows, last_row)
            buffers.write_host(entries, fill)
            buffers.written = (layout, kv_len)
            buffers.real_lens = seq_lens_k.view(-1, 2)[:, 1]
    else:
        buffers.written = buffers.real_lens = None
        pad_rows, key_start, key_len = plan
        # Device values: written by device ops on the current stream.
        q_lens = torch.stack([pad_rows, 1 - pad_rows], dim=1)[:, None, :].expand(batch, kv_heads, 2).reshape(-1)
        cu_seqlens_q[:1].zero_()
        cu_seqlens_q[1:].copy_(torch.cumsum(q_lens, 0))
        seq_lens_k.view(batch, kv_heads, 2).copy_(torch.stack([pad_rows, key_len], dim=1)[:, None, :])
        heads = (torch.arange(batch, device=device)[:, None] * rows_per_batch +
                 torch.arange(kv_heads, device=device)[None, :] * head_rows)
        row_start = torch.stack([heads, heads + key_start[:, None]], dim=2).reshape(-1, 1)
        block_table.copy_((row_start + buffers.page_steps(pages, device)[None, :]).clamp_(max=last_row))
        padded = (pad_rows > 0)[:, None]
    metadata = StepMetadata(None, cu_seqlens_q, seq_lens_k, block_table, padded)
    step_builds["count"] += 1
    _decode_step["entry"] = (key, attention_mask, metadata)
    return metadata


def key_capacity(keys):
    """The key count a decode step's plan is made for: the smallest of 16, 32, .. 4096 (powers of
    two) or of the multiples of 4096 that is >= `keys`. It is the width of the step's token-row
    block table (capacity / 16 pages per sequence) and the max_seqlen_k hint, so consecutive steps
    of a generation share the table's shape and the hint until the context passes the capacity
    (module docstring, "Plan reuse across decode steps"). The hint only caps the split count at
    max_seqlen_k / WIDEATTN_MIN_SPLIT_KEYS (dispatch/split_plan.cpp, preferred_splits): a capacity
    at most 2x the keys below 8192 and at most 1.5x above lets a split have no fewer than 128 keys
    (256 with the exact hint), and from 32768 keys on (_capi.MAX_SPLITS splits of 256) every hint
    gives the same count."""
    if keys <= 4096:
        return 1 << max(4, (keys - 1).bit_length())
    return -(-keys // 4096) * 4096


def row_capacity(rows):
    """The K/V row count (num_blocks of the token-row layout) a decode step's plan is made for when
    the cache's storage ends at its last row (transformers' DynamicCache: torch.cat makes a new
    exact tensor each step): `rows` rounded up to a multiple of 2^(bit_length - 4), at least 256,
    so at most 1/8 more rows than the tensor has (module docstring, "Plan reuse across decode
    steps")."""
    step = 1 << max(8, rows.bit_length() - 4)
    return -(-rows // step) * step


# A tensor's untyped storage: untyped_storage() (torch >= 2.0), else _storage() (1.13; storage()
# there wraps it in a TypedStorage, ten times the cost).
_untyped_storage = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage


def _storage_rows(tensor, row_stride):
    """Rows of `row_stride` elements from tensor's first element to the end of its storage."""
    storage = _untyped_storage(tensor)
    return (storage.data_ptr() + storage.nbytes() - tensor.data_ptr()) // (row_stride * tensor.element_size())


# Plan reuse across decode steps: how often a layer's call ran as a one-shot call with the exact row
# count after the plan's run refused the rounded-up one (an output inside the rows past the cache's
# end that num_blocks names), and the per-head decode calls (tests, benchmarks).
decode_reuse = {"per_head_calls": 0, "exact_retries": 0}


def _dense_forward(query, key, value, attention_mask, scaling):
    """An ordinary forward's served layer; None hands it to SDPA (a mask of another shape)."""
    batch, q_heads, q_len, head_dim = query.shape
    _, kv_heads, kv_len, _ = key.shape
    device = query.device
    verify = not _capturing_or_compiling(device)
    k_stride, v_stride = key.stride(), value.stride()
    # K/V rows of one token stride, batch entries a whole number of rows apart (else a copy).
    if k_stride != v_stride or k_stride[3] != 1 or not k_stride[2] or k_stride[0] % k_stride[2]:
        key, value = key.contiguous(), value.contiguous()
        k_stride = v_stride = key.stride()
    row_stride, head_stride = k_stride[2], k_stride[1]
    rows_per_batch = k_stride[0] // row_stride
    if (_decode_reuse["on"] and q_len == 1 and verify and not _debug["on"] and head_stride % row_stride == 0
            and kv_len):
        return _decode_forward(query, key, value, attention_mask, scaling, rows_per_batch, head_stride // row_stride)
    metadata = step_metadata(attention_mask, batch, q_len, kv_len, rows_per_batch, device, verify)
    if metadata is None:
        _warn_once("mask", "wideattn: an attention mask other than causal with left padding or a cache tail; "
                           "those calls run on SDPA")
        return None
    num_rows = (batch - 1) * rows_per_batch + kv_len
    # [B, Hq, T, D] -> [B * T, Hq, D]; for T == 1 the transpose moves nothing (one op fewer).
    q_rows = (query if q_len == 1 else query.transpose(1, 2)).reshape(batch * q_len, q_heads, head_dim)
    # token_row_layout of K and V (same strides): pages of TOKEN_ROW_PAGE rows starting at any row.
    rows = [0, max(num_rows, 1), _ops.TOKEN_ROW_PAGE, kv_heads, row_stride, row_stride, head_stride]
    out = torch.empty((batch * q_len, q_heads, head_dim), dtype=torch.bfloat16, device=device)
    # Host hints for the split-KV count: no sequence has more than q_len queries or kv_len keys.
    if verify:   # eager (neither traced nor captured): the op of the smaller schema (ops module docstring)
        _ops._prefill_packed_op(q_rows, key, value, metadata.cu_seqlens_q, metadata.seq_lens_k, metadata.block_table,
                                out, rows + rows + [q_len, kv_len, 0, 0], scaling)
    else:
        _ops._prefill_op(q_rows, key, value, metadata.cu_seqlens_q, metadata.seq_lens_k, metadata.block_table, rows,
                         rows, scaling, None, None, None, out, None, q_len, kv_len, 0, 0)
    out = out.view(batch, q_len, q_heads, head_dim)
    if metadata.padded is not None:
        out = out.masked_fill(metadata.padded[:, :, None, None], 0)
    return out


def _decode_forward(query, key, value, attention_mask, scaling, rows_per_batch, head_rows):
    """A served decode layer (one query token per batch row) whose plan serves the next steps too
    (module docstring, "Plan reuse across decode steps"): each (batch row, KV head) is a sequence
    of its own over one KV head, so the layout has no head stride (a DynamicCache's changes every
    step); the step's metadata lives in persistent buffers (StepBuffers); the row count and the
    key count are rounded up (row_capacity, key_capacity). None hands the call to SDPA."""
    batch, q_heads, _, head_dim = query.shape
    _, kv_heads, kv_len, _ = key.shape
    device = query.device
    row_stride = key.stride(2)
    num_rows = (batch - 1) * rows_per_batch + (kv_heads - 1) * head_rows + kv_len
    available = _storage_rows(key, row_stride)
    if value is not key:
        available = min(available, _storage_rows(value, row_stride))
    # A view into a larger storage (a static cache) names the rows up to the storage's end, which
    # stay the same from step to step; a cache that ends at its last row, a rounded-up count.
    num_blocks = available if available > num_rows else row_capacity(num_rows)
    capacity = key_capacity(kv_len)
    if device.type == "cuda":
        current = _ops._current_device()
        index = device.index if device.index is not None else current
        stream = _ops._raw_stream(index)
    else:
        current = index = stream = None
    metadata = decode_metadata(attention_mask, batch, kv_len, kv_heads, rows_per_batch, head_rows, num_blocks,
                               capacity, device, stream)
    if metadata is None:
        _warn_once("mask", "wideattn: an attention mask other than causal with left padding or a cache tail; "
                           "those calls run on SDPA")
        return None
    group = q_heads // kv_heads
    q_rows = query.reshape(batch * kv_heads, group, head_dim)   # [B, Hq, 1, D]: no transpose needed
    out = torch.empty((batch * kv_heads, group, head_dim), dtype=torch.bfloat16, device=device)
    rows = [0, num_blocks, _ops.TOKEN_ROW_PAGE, 1, row_stride, row_stride, row_stride]
    decode_reuse["per_head_calls"] += 1
    try:
        # Eager only (_dense_forward's condition: not traced, not captured, not debug mode). On CUDA
        # with the Python op, its plan is run without torch's dispatcher (a decode step's layers
        # are host-bound: the dispatcher is a fifth of a served layer's host time); else the op of
        # the smaller schema (ops module docstring), the C++ op once loaded.
        if index is not None and _ops._prefill_packed_op is _ops.PYTHON_PACKED_OP:
            _ops._run_cached_plan(current, index, stream, q_rows, key, value, metadata.cu_seqlens_q,
                                  metadata.seq_lens_k, metadata.block_table, rows, rows, scaling, None, None, None,
                                  out, None, 1, capacity, 0, 0)
        else:
            _ops._prefill_packed_op(q_rows, key, value, metadata.cu_seqlens_q, metadata.seq_lens_k,
                                    metadata.block_table, out, rows + rows + [1, capacity, 0, 0], scaling)
    except errors.InvalidArgumentError:
        if num_blocks == num_rows:
            raise
        # The rows past the cache's end that the rounded-up count names may hold an output (the
        # library refuses the overlap): this call names the exact rows, with a one-shot launch.
        decode_reuse["exact_retries"] += 1
        rows[1] = num_rows
        once = _ops._prefill_once if device.type == "cuda" else _ops._prefill_op
        once(q_rows, key, value, metadata.cu_seqlens_q, metadata.seq_lens_k, metadata.block_table, rows, rows,
             scaling, None, None, None, out, None, 1, capacity, 0, 0)
    out = out.view(batch, 1, q_heads, head_dim)
    if metadata.padded is not None:
        out = out.masked_fill(metadata.padded[:, :, None, None], 0)
    return out


def _layer_value(value, layer_type=FULL_ATTENTION):
    """A per-layer-type metadata entry: transformers passes a dict by layer type when the model
    has several (Gemma 4: full and sliding), the bare value when it has one."""
    return value[layer_type] if isinstance(value, dict) else value


def _host_hint(value):
    """A length hint as a host int: a Python int as given, anything else (absent, a device
    tensor, which reading would synchronise) unknown (None)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _token_rows(states, kv_heads, head_dim):
    """cache.update()'s keys as [total_k, Hkv, D] rows: transformers >= 4.57 returns them so; the
    head-major [1, Hkv, total_k, D] of the 4.5x caches is transposed."""
    if states.dim() == 4 and states.shape[1] == kv_heads and states.shape[2] != kv_heads:
        states = states[0].transpose(0, 1)
    return states.reshape(-1, kv_heads, head_dim)


def _paged_update(module, key, value, kwargs):
    """Writes the call's new K/V [1, Hkv, T, D] into transformers' paged cache and returns the
    sequences' keys and values as rows [total_k, Hkv, D]. update() picks the layer's group from
    the per-group read_index / write_index lists itself."""
    keys, values = kwargs["cache"].update(key_states=key, value_states=value, layer_idx=module.layer_idx,
                                          read_index=kwargs["read_index"], write_index=kwargs["write_index"])
    kv_heads, head_dim = key.shape[1], key.shape[-1]
    return _token_rows(keys, kv_heads, head_dim), _token_rows(values, kv_heads, head_dim)


def _cu_seqlens(kwargs, name, layer_type=FULL_ATTENTION):
    """cu_seq_lens_q / cu_seq_lens_k (cumulative_seqlens_* in transformers 4.53-4.55) as int32."""
    value = kwargs.get(f"cu_seq_lens_{name}", kwargs.get(f"cumulative_seqlens_{name}"))
    return _layer_value(value, layer_type).to(torch.int32)


# The last continuous-batching step's metadata: (key, the metadata tensors it was made from, value).
_paged_step = {"entry": None}


def paged_step_metadata(kwargs, num_rows, max_k, device):
    """(cu_seqlens_q, row_start, seq_lens_k, block_table) of a continuous-batching call's served
    layer over `num_rows` key rows (cache.update()'s) with at most `max_k` keys per sequence: the
    int32 metadata and the token-row block table of varlen_attention. kwargs is the call's
    (cu_seq_lens_q / cu_seq_lens_k of the full-attention layers); device the call's. Shared by
    the global layers of a step: reused while the metadata tensors are the same objects (held, their
    version counters unchanged) with the same row count and max_k; built anew under torch.compile
    and CUDA-graph capture."""
    sources = tuple(_layer_value(kwargs.get(f"cu_seq_lens_{n}", kwargs.get(f"cumulative_seqlens_{n}")))
                    for n in ("q", "k"))
    key = tuple((id(s), s._version) for s in sources) + (num_rows, max_k, device)
    shared = not _capturing_or_compiling(device)
    entry = _paged_step["entry"]
    if shared and entry is not None and entry[0] == key and all(a is b for a, b in zip(entry[1], sources)):
        return entry[2]
    cu_q, cu_k = (s.to(torch.int32) for s in sources)
    row_start = cu_k[:-1]
    seq_lens_k = (cu_k[1:] - cu_k[:-1]).to(torch.int32)
    metadata = (cu_q, row_start, seq_lens_k, _attention.token_row_block_table(row_start, max_k, num_rows))
    step_builds["count"] += 1
    if shared:
        _paged_step["entry"] = (key, sources, metadata)
    return metadata


def _paged_forward(module, query, key, value, scaling, kwargs):
    """A continuous-batching call's served layer: write the new K/V into the paged cache, attend
    over the rows cache.update() returns (varlen_attention's token-row pages, with the step's
    metadata shared by its global layers: paged_step_metadata). query [1, Hq, total_q, D]."""
    _, q_heads, total_q, head_dim = query.shape
    keys, values = _paged_update(module, key, value, kwargs)
    # max_seqlen_k bounds every sequence's keys (the token-row block table's width): transformers
    # passes a host int; anything else would need a host read, so the key rows bound it instead.
    max_k = _host_hint(_layer_value(kwargs.get("max_seqlen_k")))
    if max_k is None:
        max_k = keys.shape[0]
    max_q = _host_hint(_layer_value(kwargs.get("max_seqlen_q")))
    q_rows = query.transpose(1, 2).reshape(total_q, q_heads, head_dim)
    out = torch.empty((total_q, q_heads, head_dim), dtype=torch.bfloat16, device=query.device)
    if total_q:
        cu_q, row_start, seq_lens_k, table = paged_step_metadata(kwargs, keys.shape[0], max_k, query.device)
        k_rows = _attention.token_row_layout(keys, keys.stride(0), keys.stride(1), keys.shape[0], keys.shape[1])
        v_rows = _attention.token_row_layout(values, values.stride(0), values.stride(1), values.shape[0],
                                             values.shape[1])
        _attention.rows_prefill(q_rows, keys, values, k_rows, v_rows, cu_q, row_start, seq_lens_k, max_k, scaling,
                                out, max_seqlen_q=max_q or 0, block_table=table)
    return out.view(1, total_q, q_heads, head_dim)


def packed_mask(cu_seqlens_q, cu_seqlens_k, total_q, total_k, sliding_window, dtype):
    """The additive mask [1, 1, total_q, total_k] of a packed continuous-batching step, the one
    transformers' continuous batching builds for paged|sdpa (build_attention_mask): sequence s's
    query rows see its own key rows under the bottom-right causal rule, and only the last
    `sliding_window` of them when given; rows of no sequence (CUDA-graph padding) see no key
    (finfo.min of `dtype`, so SDPA gives finite values there). cu_seqlens_q / cu_seqlens_k are
    the step's packed query and key offsets (device tensors of num_seqs + 1 entries). Built on the
    device: no host sync."""
    device = cu_seqlens_q.device
    cu_q, cu_k = cu_seqlens_q.long(), cu_seqlens_k.long()
    last = cu_q.shape[0] - 2
    rows = torch.arange(total_q, device=device)
    cols = torch.arange(total_k, device=device)
    seq_q = torch.searchsorted(cu_q[1:], rows, right=True)
    seq_k = torch.searchsorted(cu_k[1:], cols, right=True)
    valid = (seq_q <= last)[:, None] & (seq_k <= last)[None, :]
    seq_q, seq_k = seq_q.clamp(max=last), seq_k.clamp(max=last)
    context = (cu_k[1:] - cu_k[:-1]) - (cu_q[1:] - cu_q[:-1])
    own_key = rows - cu_q[seq_q] + context[seq_q]
    distance = own_key[:, None] - (cols - cu_k[seq_k])[None, :]
    allowed = valid & (seq_q[:, None] == seq_k[None, :]) & (distance >= 0)
    if sliding_window is not None:
        allowed &= distance < sliding_window
    mask = torch.zeros((total_q, total_k), dtype=dtype, device=device)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)[None, None]


def _paged_fallback(module, query, key, value, kwargs):
    """A continuous-batching call wideattn does not serve: the cache update of the served path,
    then transformers' SDPA function over the rows with the packed mask of the layer's type."""
    keys, values = _paged_update(module, key, value, kwargs)
    window = kwargs.get("sliding_window")
    layer_type = SLIDING_ATTENTION if window is not None else FULL_ATTENTION
    mask = packed_mask(_cu_seqlens(kwargs, "q"), _cu_seqlens(kwargs, "k", layer_type), query.shape[2],
                       keys.shape[0], window, query.dtype)
    rest = {name: item for name, item in kwargs.items() if name not in PAGED_ONLY_KWARGS}
    return _fallback()(module, query, keys.transpose(0, 1)[None], values.transpose(0, 1)[None], mask, **rest)
