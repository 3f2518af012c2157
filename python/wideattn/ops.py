"""The PyTorch custom ops (namespace `wideattn`, torch.library) and the functions that call them.

Ops (every output is an argument the caller allocated, so calls work under torch.compile(fullgraph=True)
through functionalisation and inside CUDA graphs; the CUDA implementation launches on the current
stream of the tensors' device through the default context; the CPU one validates the call with
the library (wideattn_is_supported, no driver) and runs wideattn.reference):

    wideattn::prefill(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                      softmax_scale, q_scale?, k_scale?, v_scale?, out!, lse!?,
                      max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0)
    wideattn::quantize_to_cache(src, cache!, slot_mapping?, scale, cache_layout, nonfinite_count!?)
    wideattn::compute_scale(src, slot_mapping?, scale!, nonfinite_count!?, power_of_two=False)
    wideattn::prefill_packed(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out!, config, softmax_scale)
    wideattn::prefill_k_from_v(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale,
                               v_scale?, k_norm_scale, inv_freq?, rope_theta, rotary_dims, out!, lse!?,
                               max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0, cos_sin?=None)
    wideattn::k_from_v_rebuild(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale?,
                               k_norm_scale, inv_freq?, rope_theta, rotary_dims, out, k_out!, v_out!,
                               out_block_table, max_seqlen_q=0, max_seqlen_k=0, flags=0, cos_sin?=None)

wideattn::prefill_k_from_v is wideattn::prefill over a V-only cache (WIDEATTN_FLAG_K_FROM_V,
docs/design.md section 2 "K from V in Gemma 4's global layers"): no k, K rebuilt from v by the
kernels with the description k_norm_scale (fp32 [head_dim], on the call's device), inv_freq (fp32
[rotary_dims / 2] or None), rope_theta, rotary_dims and cos_sin (a bf16 [positions, rotary_dims / 2,
2] cos / sin table, C API 0.7.0, or None; last, so calls without it keep their arguments). Its CUDA
implementation is a one-shot
wideattn_prefill with a workspace of its own (no plan cache); its CPU implementation validates the
call with the library and runs wideattn.reference with K rebuilt (reference.k_from_v_keys).

wideattn::k_from_v_rebuild writes the keys of the K-from-V call of the same arguments (the call
wideattn::prefill_k_from_v would make with out, no lse, softmax scale REBUILD_SOFTMAX_SCALE and no
split; the library validates that whole call, q and out included, and reads neither) into the
bf16 paged caches k_out (K rebuilt) and v_out (V as bf16), [num_blocks, block_size, num_kv_heads,
head_dim] with block_size and num_kv_heads those of v_layout, at the pages of out_block_table
(int32 [num_seqs, width]) (wideattn_k_from_v_rebuild, C API 0.8.0). An ordinary wideattn::prefill
over k_out / v_out / out_block_table then computes the attention over the rebuilt keys: how
attention.prefill_k_from_v serves calls with several query tokens per sequence. Its CUDA
implementation launches wideattn_k_from_v_rebuild on the current stream; its CPU implementation
validates the call's params with the library (wideattn_is_supported: a refusal for want of a
kernel that serves the K-from-V call itself is not an error here) and writes what the kernel
writes (_k_from_v_rebuild_cpu), the metadata read as the kernel reads it (checked mode: refused as
the library refuses it, out_block_table's messages prefixed "out: ").

wideattn::compute_scale writes src's per-tensor e4m3 scale into scale (wideattn_compute_scale),
with power_of_two=True rounded up to a power of two on the device (wideattn_compute_scale_pow2, C
API 0.9.0: reference.power_of_two_scale's values, one launch).

wideattn::prefill_packed is wideattn::prefill without lse and scales, its KV layouts, hints,
num_splits and flags packed into one int list, config = k_layout + v_layout + [max_seqlen_q,
max_seqlen_k, num_splits, flags] (pack_config; implementations: wideattn::prefill's, on the
unpacked arguments, unpack_config). torch's dispatcher costs with the argument count and kind
(SymInt lists and optional tensors add most; tools/bench/python_overhead.py times both ops and
no-op ops of both schemas), so the
Python entry points call it in eager mode for the calls it can take (no lse, no scales) and
wideattn::prefill otherwise and under torch.compile (whose graphs keep showing
wideattn::prefill, with symbolic sizes in its SymInt lists). Callers that want one op for
everything call wideattn::prefill.

A KV layout is [offset, num_blocks, block_size, num_kv_heads, block_stride, slot_stride,
head_stride] in elements relative to the base tensor's first element: key j of sequence s lives
at base + offset + block_table[s][j // block_size] * block_stride + (j % block_size) * slot_stride
+ head * head_stride (docs/design.md section 2). prefill() takes the paged cache tensors of a
serving engine and derives it; varlen_attention() takes dense per-sequence K/V rows and builds
"token-row pages" (a page of 16 consecutive rows starting at any row), which describes the rows
without a copy.

Split-KV (docs/design.md "Split-KV"): max_seqlen_q / max_seqlen_k are host-side hints (0 unknown)
that steer the library's split count, num_splits is 0 (the library chooses), 1 (never split) or
an exact count up to _capi.MAX_SPLITS. The CUDA implementation asks wideattn_workspace_size for
the call's workspace (host only, no device read) and allocates it with torch.empty on the call's
device and current stream: the caching allocator's stream-ordered reuse makes it safe to free
after the launch is queued, and inside a CUDA-graph capture it comes from the graph's pool.

Plans (C API 0.4.0): the CUDA implementation of wideattn::prefill keeps a plan per plan key
(ops.plans, a PlanCache; plan_key: the device, stream, shapes, strides, dtypes, metadata
pointers, scale pointers, softmax scale, hints and flags, which is what wideattn_plan_create
fixes; least recently used dropped beyond PLAN_CACHE_ENTRIES) with its workspace, made (and
validated by the library) at the key's first call, and runs it with the call's q, K/V bases, out
and lse: the global layers of a step, which share the step's metadata tensors, run one plan. The
metadata's contents are not in the key and need not be: the plan keeps their pointers and the
kernels read them on the device at every run, so new contents under the same pointers (a new
step written into the same buffers, a replayed CUDA graph) are what the next run reads. A call
that hits does no more on the host than build the key (one flat tuple of ints, dtypes and the
shape and strides of q and out), look it up and queue wideattn_plan_run. Under CUDA-graph capture
and in debug mode (wideattn.set_debug) each call is a one-shot wideattn_prefill with a workspace
of its own instead.

The C++ op wideattn_cpp::prefill_packed (wideattn.cpp_ops, built on demand; $WIDEATTN_CPP_OPS=1 at
import) is wideattn::prefill_packed with this CUDA path in C++ for calls whose plan is cached:
_packed_cuda_handle is its slow path; once it is loaded the Python entry points call it instead
of wideattn::prefill_packed (_prefill_packed_op).

flags is wideattn_prefill_params.flags: _capi.FLAG_CHECK_METADATA is checked mode (docs/design.md
section 6): the CUDA implementation's library call copies cu_seqlens_q, seq_lens_k and the used
block-table rows to the host and refuses bad entries before launching (it waits for the stream,
so it cannot be captured in a CUDA graph); the CPU implementation applies the same rules to its
host tensors (reference.metadata_error) with the library's messages; without it, it still
refuses keys it cannot read (reference.addressing_error: a seq_lens_k past its block_table row,
a used block outside the cache), which the kernels would clamp.
"""

import collections
import ctypes
import functools
import threading

import torch

from . import _capi
from . import _checks
from . import errors
from . import reference
from .library import _debug, default_context, switch_from_env

ENV_CPP_OPS = "WIDEATTN_CPP_OPS"

NAMESPACE = "wideattn"
TOKEN_ROW_PAGE = 16          # keys per page of a token-row layout (the kernels' page multiple)
LAYOUT_LEN = len(reference.LAYOUT_FIELDS)
CPU_METADATA_NOTE = "the CPU implementation cannot read that key"
CACHE_LAYOUT_LEN = 5         # quantize: [num_blocks, block_size, block_stride, slot_stride, head_stride], bytes,
                             # optionally followed by wideattn_quantize_params.flags (cache_layout_fields)

_DTYPE_CODES = {torch.bfloat16: _capi.DTYPE_BF16, torch.float16: _capi.DTYPE_F16,
                torch.float32: _capi.DTYPE_F32, torch.float64: _capi.DTYPE_F64}
for _e4m3 in _checks.E4M3_DTYPES:
    _DTYPE_CODES[_e4m3] = _capi.DTYPE_E4M3
E4M3_DTYPE = getattr(torch, "float8_e4m3fn", torch.uint8)   # what quantize() allocates


def _ptr(tensor):
    return tensor.data_ptr() if tensor is not None else None


def prefill_params(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                   q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=_capi.SPLITS_AUTO,
                   flags=0):
    """The wideattn_prefill_params of one call (pointers from the tensors, strides in elements),
    without a workspace (attach_workspace adds one). Arguments as the wideattn::prefill op takes
    them (module docstring): q, k, v the tensors (k and v the bases of k_layout and v_layout, the
    KV layouts), cu_seqlens_q, seq_lens_k, block_table the metadata, softmax_scale, the optional
    per-tensor scale tensors q_scale, k_scale, v_scale, the outputs out and lse (or None), the
    hints max_seqlen_q and max_seqlen_k (0 unknown), num_splits and flags."""
    k_off, num_blocks, block_size, num_kv_heads, k_block, k_slot, k_head = k_layout
    v_off, _, _, _, v_block, v_slot, v_head = v_layout
    return _capi.PrefillParams(
        q.data_ptr(), q.stride(0), q.stride(1),
        k.data_ptr() + k_off * k.element_size(), k_block, k_slot, k_head,
        v.data_ptr() + v_off * v.element_size(), v_block, v_slot, v_head,
        out.data_ptr(), out.stride(0), out.stride(1),
        _ptr(lse), lse.stride(0) if lse is not None else 0,
        cu_seqlens_q.data_ptr(), seq_lens_k.data_ptr(), block_table.data_ptr(), block_table.stride(0),
        _ptr(q_scale), _ptr(k_scale), _ptr(v_scale),
        seq_lens_k.shape[0], q.shape[0], q.shape[1], num_kv_heads, q.shape[2], block_size, num_blocks,
        _DTYPE_CODES[q.dtype], _DTYPE_CODES[k.dtype], _DTYPE_CODES[out.dtype], softmax_scale,
        int(max_seqlen_q), int(max_seqlen_k), int(num_splits), None, 0, int(flags))


def attach_workspace(params, workspace):
    """Points params at a workspace tensor (its bytes; None detaches) and returns params."""
    params.workspace = _ptr(workspace)
    params.workspace_bytes = workspace.numel() * workspace.element_size() if workspace is not None else 0
    return params


def allocate_workspace(size, device):
    """A workspace of `size` bytes on `device` (None for 0): torch.empty through the caching
    allocator on the current stream, whose blocks start 512-byte aligned (the library asks 16)."""
    if size <= 0:
        return None
    return torch.empty(size, dtype=torch.uint8, device=device)


def cache_layout_fields(cache_layout):
    """(num_blocks, block_size, block_stride, slot_stride, head_stride, flags) of a quantize
    cache_layout: CACHE_LAYOUT_LEN entries (flags 0), or those and wideattn_quantize_params.flags
    (_capi.FLAG_V_TRANSPOSED: the transposed V layout, where head_stride is the page's and the
    rows of a page are block_size bytes apart)."""
    if len(cache_layout) == CACHE_LAYOUT_LEN:
        return (*cache_layout, 0)
    if len(cache_layout) == CACHE_LAYOUT_LEN + 1:
        return tuple(cache_layout)
    raise errors.invalid_argument("wideattn_quantize_to_cache",
                                  f"cache_layout has {len(cache_layout)} entries; expected {CACHE_LAYOUT_LEN} "
                                  f"or {CACHE_LAYOUT_LEN + 1} (with flags)")


def quantize_params(src, cache, slot_mapping, scale, cache_layout, nonfinite_count):
    """The wideattn_quantize_params of one wideattn::quantize_to_cache call: src the bf16
    [tokens, heads, head_dim] tensor, cache the e4m3 destination with cache_layout [num_blocks,
    block_size, block_stride, slot_stride, head_stride] (bytes) and optionally flags
    (cache_layout_fields), slot_mapping (int64 per token, or None for a flat destination), scale
    the float32 scale tensor, nonfinite_count the optional int32 counter (or None)."""
    num_blocks, block_size, block_stride, slot_stride, head_stride, flags = cache_layout_fields(cache_layout)
    return _capi.QuantizeParams(
        src.data_ptr(), src.stride(0), src.stride(1), cache.data_ptr(), block_stride, slot_stride, head_stride,
        _ptr(slot_mapping), scale.data_ptr(), _ptr(nonfinite_count),
        src.shape[0], src.shape[1], src.shape[2], block_size, num_blocks, _capi.DTYPE_BF16, flags)


def scale_params(src, slot_mapping, scale, nonfinite_count):
    """The wideattn_scale_params of one wideattn::compute_scale call: src the bf16 [tokens, heads,
    head_dim] tensor, slot_mapping (None: every token counts), scale the float32 tensor written,
    nonfinite_count the optional int32 counter (or None)."""
    return _capi.ScaleParams(
        src.data_ptr(), src.stride(0), src.stride(1), _ptr(slot_mapping), scale.data_ptr(),
        _ptr(nonfinite_count), src.shape[0], src.shape[1], src.shape[2], _capi.DTYPE_BF16)


_raw_stream_fn = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _raw_stream(index):
    """The raw CUstream handle of the current stream of CUDA device `index` (an int)."""
    if _raw_stream_fn is not None:
        return _raw_stream_fn(index)
    return torch.cuda.current_stream(index).cuda_stream


# The C functions behind torch.cuda.current_device() and torch.cuda.is_current_stream_capturing(),
# without their Python wrappers (the CUDA implementation only runs once CUDA is initialised).
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_stream_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


def _launch(device, launch, params):
    """Runs one launch on the current stream of `device`, with that device's context current."""
    current = torch.cuda.current_device()
    index = current if device.index is None else device.index
    stream = ctypes.c_void_p(_raw_stream(index))
    if index != current:
        with torch.cuda.device(index):
            launch(params, stream)
        return
    try:
        launch(params, stream)
    except Exception as error:  # a thread whose CUDA context was never made current
        if getattr(error, "status", None) != _capi.STATUS_NO_DEVICE:
            raise
        torch.cuda.set_device(index)
        launch(params, stream)


def current_stream(device):
    """The raw CUstream handle of the current stream of a CUDA device."""
    return _raw_stream(torch.cuda.current_device() if device.index is None else device.index)


PLAN_CACHE_ENTRIES = 64       # plans (with their workspaces) the CUDA implementation keeps


class PlanCache:
    """The CUDA implementation's plans by plan key (plan_key: everything of a call's params but the
    five per-layer pointers), least recently used dropped beyond `entries`. An entry holds the plan
    and its workspace tensor, so the workspace lives as long as the plan that uses it. A lookup
    that hits takes no lock (dict and OrderedDict operations are atomic under the GIL); adding and
    clearing do."""

    def __init__(self, entries=PLAN_CACHE_ENTRIES):
        self.entries = entries
        self._plans = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key):
        """The (plan, workspace) entry of plan key `key` (None when there is none), made the most
        recently used."""
        entry = self._plans.get(key)
        if entry is not None:
            self.hits += 1
            try:
                self._plans.move_to_end(key)
            except KeyError:  # dropped by another thread since
                pass
        return entry

    def put(self, key, entry):
        """Adds the (plan, workspace) `entry` under plan key `key`, closing the plans dropped."""
        with self._lock:
            self.misses += 1
            self._plans[key] = entry
            self._plans.move_to_end(key)
            while len(self._plans) > self.entries:
                _, (plan, _) = self._plans.popitem(last=False)
                plan.close()

    def clear(self):
        """Closes and drops every plan."""
        with self._lock:
            for plan, _ in self._plans.values():
                plan.close()
            self._plans.clear()

    def __len__(self):
        return len(self._plans)


plans = PlanCache()


def _cuda_state(tensor):
    """(the current device's index, the index of the CUDA device `tensor` is on, whether the
    current stream is being captured, the raw current stream of `tensor`'s device) for the CUDA
    implementation."""
    index = tensor.get_device()
    return _current_device(), index, _stream_capturing(), _raw_stream(index)


def _on_device(index):
    """A context manager making CUDA device `index` current."""
    return torch.cuda.device(index)


def plan_key(device_index, stream, q, k, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
             softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags):
    """The key of a call's plan in the plan cache: what wideattn_plan_create fixes, and only that
    (docs/design.md "Plans": the plan keeps the metadata pointers and every host-side value of the
    params; the kernels read the metadata contents on the device at each run, so contents that
    change between calls under the same pointers are read anew, never cached). The arguments are
    the op's (q, k, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
    q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags) with the
    device_index and raw stream of the call. The tuple: the device and stream (a plan's workspace
    serves the runs of one stream), q's shape and strides (total_q, heads, head_dim), out's
    strides, the q / kv / out dtypes, the lse head stride (None without an lse), the pointers of
    cu_seqlens_q, seq_lens_k and block_table with num_seqs and the block-table row stride, the KV
    layouts but their offsets (an offset moves a base pointer, which each run passes), the softmax
    scale, the split-KV hints, num_splits, flags and the pointers of the scale tensors. v's dtype
    is not in it: the params carry one kv dtype, k's. _prefill_cuda builds the same tuple inline
    (a call of this function costs as much as the rest of a cache hit); the tests check that the
    two agree."""
    return (device_index, stream, q.shape, q.stride(), out.stride(), q.dtype, k.dtype, out.dtype,
            None if lse is None else lse.stride(0), cu_seqlens_q.data_ptr(), seq_lens_k.data_ptr(), seq_lens_k.shape[0],
            block_table.data_ptr(), block_table.stride(0), *k_layout[1:], *v_layout[1:], softmax_scale,
            max_seqlen_q, max_seqlen_k, num_splits, flags, None if q_scale is None else q_scale.data_ptr(),
            None if k_scale is None else k_scale.data_ptr(), None if v_scale is None else v_scale.data_ptr())


def _prefill_cuda(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                  q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    _prefill_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale, q_scale,
                       k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags)


def _prefill_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                       q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    """The CUDA implementation of wideattn::prefill; returns the cached Plan that ran the call, or
    None when the call ran one-shot (under capture, in debug mode)."""
    current, index, capturing, stream = _cuda_state(q)
    if capturing or _debug["on"]:
        # Under capture the workspace comes from the graph's pool for this launch only (a cached plan's
        # could be evicted while a graph still uses it); in debug mode every call is validated anew.
        _prefill_once(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                      q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags)
        return None
    return _run_cached_plan(current, index, stream, q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                            softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits,
                            flags)


def _run_cached_plan(current, index, stream, q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                     softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags):
    """Runs wideattn::prefill's call (the op's arguments after `stream`) through its cached plan
    (made first when there is none) on `stream`, the raw current stream of CUDA device `index`
    (`current`: the current device); returns the plan. For callers that know the stream is not
    being captured and debug mode is off: _prefill_cuda_plan, and the transformers integration's
    eager decode layers, which call it without torch's dispatcher (the op's arguments are theirs)."""
    # plan_key(), inline: the hot path of every layer.
    key = (index, stream, q.shape, q.stride(), out.stride(), q.dtype, k.dtype, out.dtype,
           None if lse is None else lse.stride(0), cu_seqlens_q.data_ptr(), seq_lens_k.data_ptr(), seq_lens_k.shape[0],
           block_table.data_ptr(), block_table.stride(0), *k_layout[1:], *v_layout[1:], softmax_scale,
           max_seqlen_q, max_seqlen_k, num_splits, flags, None if q_scale is None else q_scale.data_ptr(),
           None if k_scale is None else k_scale.data_ptr(), None if v_scale is None else v_scale.data_ptr())
    entry = plans.get(key)
    if entry is None or not entry[0].handle:  # none yet, or closed with its context (wideattn.configure)
        entry = _make_plan(index, q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                           q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags)
        plans.put(key, entry)
    plan = entry[0]
    k_offset, v_offset = k_layout[0], v_layout[0]
    q_ptr, o_ptr = q.data_ptr(), out.data_ptr()
    k_ptr = k.data_ptr() + k_offset * k.element_size() if k_offset else k.data_ptr()
    v_ptr = v.data_ptr() + v_offset * v.element_size() if v_offset else v.data_ptr()
    lse_ptr = None if lse is None else lse.data_ptr()
    if index != current:
        with _on_device(index):
            plan.run(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stream)
        return plan
    try:
        plan.run(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stream)
    except errors.NoDeviceError:  # a thread whose CUDA context was never made current
        torch.cuda.set_device(index)
        plan.run(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stream)
    return plan


def _make_plan(index, q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
               q_scale, k_scale, v_scale, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags):
    """(plan, workspace) of a call on device `index`, made with that device current: params
    (validated by wideattn_plan_create), the workspace it wants, the plan."""
    params = prefill_params(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                            softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q or 0,
                            max_seqlen_k or 0, num_splits or 0, flags)
    context = default_context()
    with _on_device(index):
        try:
            workspace = allocate_workspace(context.workspace_size(params), q.device)
        except errors.NoDeviceError:  # a thread whose CUDA context was never made current
            torch.cuda.set_device(index)
            workspace = allocate_workspace(context.workspace_size(params), q.device)
        return context.plan(attach_workspace(params, workspace)), workspace


def _prefill_once(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                  q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    """wideattn_prefill of one call with a workspace of its own (CUDA-graph capture, debug mode)."""
    params = prefill_params(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                            softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q or 0,
                            max_seqlen_k or 0, num_splits or 0, flags)
    _launch_one_shot(q.device, params)


def _launch_one_shot(device, params):
    """wideattn_prefill of `params` on `device` with a workspace of its own."""
    context = default_context()

    def launch(call_params, stream):
        # Sized and allocated with the call's device current (wideattn_workspace_size reads the
        # current device's attributes); freed after the launch is queued, reused only by work
        # ordered after it on this stream.
        workspace = allocate_workspace(context.workspace_size(call_params), device)
        context.launch_prefill(attach_workspace(call_params, workspace), stream)

    _launch(device, launch, params)


def _arch_capability(arch):
    """(major, minor) of "sm_90a" / "sm_120a" / "sm_89"."""
    number = int("".join(ch for ch in arch[len("sm_"):] if ch.isdigit()))
    return number // 10, number % 10


def validate_prefill(params):
    """Validates a call (`params`, a _capi.PrefillParams) exactly as wideattn_prefill would (the
    split fields included) and checks that a kernel of the bundle serves it on one of the
    bundle's archs (wideattn_is_supported, no driver); raises the library's error otherwise.
    Returns the KernelInfo that would run. The workspace is the launch's concern (the CUDA
    implementation sizes and attaches it)."""
    context = default_context()
    archs = sorted({k.arch for k in context.kernels() if k.kind == "prefill"})
    failure = None
    for arch in archs:
        try:
            return context.is_supported(params, _arch_capability(arch))
        except Exception as error:
            if getattr(error, "status", None) != _capi.STATUS_UNSUPPORTED:
                raise
            failure = error
    if failure is not None:
        raise failure
    return None


def _check_cpu_metadata(cu_seqlens_q, seq_lens_k, block_table, total_q, layout, flags):
    """The CPU implementations' metadata rule (layout: the KV layout the keys are read through):
    checked mode (flags) applies every rule; otherwise the keys the reference cannot read (where
    the kernels would clamp) are refused all the same, as indexing would fail or wrap."""
    if flags & _capi.FLAG_CHECK_METADATA:
        error = reference.metadata_error(cu_seqlens_q, seq_lens_k, block_table, total_q, layout[2], layout[1])
    else:
        error = reference.addressing_error(seq_lens_k, block_table, layout[2], layout[1], CPU_METADATA_NOTE)
    if error is not None:
        raise errors.invalid_argument("wideattn_prefill", error)


def _prefill_cpu(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                 q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    validate_prefill(prefill_params(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout,
                                    softmax_scale, q_scale, k_scale, v_scale, out, lse, max_seqlen_q or 0,
                                    max_seqlen_k or 0, num_splits or 0, flags))
    _check_cpu_metadata(cu_seqlens_q, seq_lens_k, block_table, q.shape[0], k_layout, flags)
    dtype = torch.float64 if out.dtype == torch.float64 else torch.float32
    result, result_lse = reference.attention(q, k, v, cu_seqlens_q, seq_lens_k, block_table, list(k_layout),
                                             list(v_layout), softmax_scale, q_scale, k_scale, v_scale, dtype,
                                             v_transposed=bool(flags & _capi.FLAG_V_TRANSPOSED))
    out.copy_(result)
    if lse is not None:
        lse[:, :q.shape[0]].copy_(result_lse)


def _prefill_fake(q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale,
                  q_scale, k_scale, v_scale, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    return None


def _quantize_cuda(src, cache, slot_mapping, scale, cache_layout, nonfinite_count):
    params = quantize_params(src, cache, slot_mapping, scale, cache_layout, nonfinite_count)
    _launch(src.device, default_context().launch_quantize, params)


def _quantize_cpu(src, cache, slot_mapping, scale, cache_layout, nonfinite_count):
    num_blocks, block_size, block_stride, slot_stride, head_stride, flags = cache_layout_fields(cache_layout)
    codes, _ = reference.quantize(src, scale)
    finite = torch.isfinite(src.float())
    slots = torch.arange(src.shape[0]) if slot_mapping is None else slot_mapping.long()
    keep = (slots >= 0) & (slots < num_blocks * block_size)
    slots = slots[keep]
    row, dim_stride = reference.slot_rows(slots // block_size, slots % block_size, block_size, block_stride,
                                          slot_stride, bool(flags & _capi.FLAG_V_TRANSPOSED))
    index = (row[:, None, None] + torch.arange(src.shape[1])[None, :, None] * head_stride +
             torch.arange(src.shape[2])[None, None, :] * dim_stride)
    reference._flat(reference.e4m3_codes(cache))[index] = codes[keep]
    if nonfinite_count is not None:
        nonfinite_count += int((~finite[keep]).sum())


def _scale_cuda(src, slot_mapping, scale, nonfinite_count, power_of_two=False):
    launch = default_context().launch_scale
    if power_of_two:
        launch = functools.partial(launch, power_of_two=True)
    _launch(src.device, launch, scale_params(src, slot_mapping, scale, nonfinite_count))


def _scale_cpu(src, slot_mapping, scale, nonfinite_count, power_of_two=False):
    result, nonfinite = reference.compute_scale(src, slot_mapping)
    if power_of_two:
        result = reference.power_of_two_scale(result)
    scale.reshape(-1)[:1].copy_(result)
    if nonfinite_count is not None:
        nonfinite_count += nonfinite


def _no_output(*args):
    return None


CONFIG_LEN = 2 * LAYOUT_LEN + 4     # wideattn::prefill_packed's config: k_layout, v_layout, 2 hints, splits, flags


def pack_config(k_layout, v_layout, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    """wideattn::prefill_packed's config list (module docstring) of wideattn::prefill's k_layout,
    v_layout, max_seqlen_q, max_seqlen_k, num_splits and flags."""
    return [*k_layout, *v_layout, max_seqlen_q, max_seqlen_k, num_splits, flags]


def unpack_config(config):
    """(k_layout, v_layout, max_seqlen_q, max_seqlen_k, num_splits, flags) of a config list
    (pack_config's inverse)."""
    return (config[:LAYOUT_LEN], config[LAYOUT_LEN:2 * LAYOUT_LEN], *config[2 * LAYOUT_LEN:])


def packed_as_prefill_args(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    """The wideattn::prefill arguments (a tuple) of the wideattn::prefill_packed call of q, k, v,
    cu_seqlens_q, seq_lens_k, block_table, out, config and softmax_scale (tests: recording either op)."""
    k_layout, v_layout, max_q, max_k, splits, flags = unpack_config(config)
    return (q, k, v, cu_seqlens_q, seq_lens_k, block_table, k_layout, v_layout, softmax_scale, None, None, None, out,
            None, max_q, max_k, splits, flags)


def _packed_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    """wideattn::prefill_packed's CUDA implementation on the unpacked config: _prefill_cuda_plan's
    result."""
    return _prefill_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, config[:LAYOUT_LEN],
                              config[LAYOUT_LEN:2 * LAYOUT_LEN], softmax_scale, None, None, None, out, None,
                              *config[2 * LAYOUT_LEN:])


def _packed_cuda(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    _packed_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale)


def _packed_cuda_handle(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    """wideattn::prefill_packed's CUDA implementation for the C++ op (wideattn.cpp_ops): runs the
    call and returns (the handle of the cached plan that ran it, the address of the
    wideattn_plan_run of its library), or None when it ran one-shot."""
    plan = _packed_cuda_plan(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale)
    if plan is None or not plan.handle:
        return None
    return plan.handle, plan.run_address()


def _packed_cpu(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    _prefill_cpu(*packed_as_prefill_args(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale))


def _packed_fake(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale):
    return None


def k_from_v_struct(k_norm_scale, inv_freq, rope_theta, rotary_dims, cos_sin=None):
    """The wideattn_k_from_v (the C API's current size: inv_freq and cos_sin included) of
    k_norm_scale (the float32 [head_dim] weight tensor), inv_freq (float32 [rotary_dims / 2] tensor
    or None), rope_theta, rotary_dims and cos_sin (the bf16 [positions, rotary_dims / 2, 2] table,
    its rows cos_sin_positions, or None)."""
    return _capi.KFromV(ctypes.sizeof(_capi.KFromV), _capi.ROPE_PROPORTIONAL, k_norm_scale.data_ptr(),
                        float(rope_theta), int(rotary_dims), _capi.ROPE_ROTATE_HALF, 0, _ptr(inv_freq),
                        _ptr(cos_sin), cos_sin.shape[0] if cos_sin is not None else 0, 0)


def k_from_v_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale, v_scale, description,
                    out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0):
    """wideattn_prefill_params of a K-from-V call (prefill_params of q, v as both K/V bases with
    v_layout as both layouts, cu_seqlens_q, seq_lens_k, block_table, softmax_scale, v_scale, out,
    lse, max_seqlen_q, max_seqlen_k, num_splits and flags), then k_cache NULL (its strides 0, not
    read), WIDEATTN_FLAG_K_FROM_V added to flags and k_from_v pointing at `description` (a
    _capi.KFromV the caller keeps alive)."""
    params = prefill_params(q, v, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_layout, softmax_scale,
                            None, None, v_scale, out, lse, max_seqlen_q or 0, max_seqlen_k or 0, num_splits or 0,
                            flags | _capi.FLAG_K_FROM_V)
    params.k_cache, params.k_block_stride, params.k_slot_stride, params.k_head_stride = None, 0, 0, 0
    params.k_from_v = ctypes.pointer(description)
    return params


def _k_from_v_cuda(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale, v_scale, k_norm_scale,
                   inv_freq, rope_theta, rotary_dims, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0,
                   cos_sin=None):
    description = k_from_v_struct(k_norm_scale, inv_freq, rope_theta, rotary_dims, cos_sin)
    _launch_one_shot(q.device, k_from_v_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale,
                                               v_scale, description, out, lse, max_seqlen_q, max_seqlen_k, num_splits,
                                               flags))


def _k_from_v_cpu(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale, v_scale, k_norm_scale,
                  inv_freq, rope_theta, rotary_dims, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0,
                  cos_sin=None):
    description = k_from_v_struct(k_norm_scale, inv_freq, rope_theta, rotary_dims, cos_sin)
    validate_prefill(k_from_v_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale, v_scale,
                                     description, out, lse, max_seqlen_q, max_seqlen_k, num_splits, flags))
    _check_cpu_metadata(cu_seqlens_q, seq_lens_k, block_table, q.shape[0], v_layout, flags)
    dtype = torch.float64 if out.dtype == torch.float64 else torch.float32
    frequencies = reference.k_from_v_inv_freq(q.shape[2], rotary_dims, rope_theta, inv_freq)
    result, result_lse = reference.attention(q, v, v, cu_seqlens_q, seq_lens_k, block_table, list(v_layout),
                                             list(v_layout), softmax_scale, None, None, v_scale, dtype,
                                             k_from_v=(k_norm_scale, frequencies, cos_sin))
    out.copy_(result)
    if lse is not None:
        lse[:, :q.shape[0]].copy_(result_lse)


# The softmax scale of the params of a rebuild: the rebuild reads no score, but the library validates
# the whole K-from-V call, whose softmax_scale must be finite and > 0.
REBUILD_SOFTMAX_SCALE = 1.0


def rebuild_out_struct(k_out, v_out, out_block_table):
    """The wideattn_k_from_v_rebuild_out (this C API's size) of the bf16 paged caches k_out and
    v_out ([num_blocks, block_size, num_kv_heads, head_dim], their strides in elements) and the int32
    table out_block_table [num_seqs, width] (its row stride out_block_table.stride(0))."""
    return _capi.KFromVRebuildOut(ctypes.sizeof(_capi.KFromVRebuildOut), 0, k_out.data_ptr(), *k_out.stride()[:3],
                                  v_out.data_ptr(), *v_out.stride()[:3], out_block_table.data_ptr(),
                                  out_block_table.stride(0), k_out.shape[0], 0)


def k_from_v_rebuild_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, description, out,
                            max_seqlen_q=0, max_seqlen_k=0, flags=0):
    """The wideattn_prefill_params of a rebuild (wideattn::k_from_v_rebuild): k_from_v_params of the
    K-from-V call of q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, `description`
    (a _capi.KFromV the caller keeps alive), out, max_seqlen_q, max_seqlen_k and flags, with
    softmax scale REBUILD_SOFTMAX_SCALE, no lse and no split."""
    return k_from_v_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, REBUILD_SOFTMAX_SCALE, v_scale,
                           description, out, None, max_seqlen_q, max_seqlen_k, _capi.SPLITS_AUTO, flags)


def _k_from_v_rebuild_cuda(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, k_norm_scale, inv_freq,
                           rope_theta, rotary_dims, out, k_out, v_out, out_block_table, max_seqlen_q=0,
                           max_seqlen_k=0, flags=0, cos_sin=None):
    description = k_from_v_struct(k_norm_scale, inv_freq, rope_theta, rotary_dims, cos_sin)
    params = k_from_v_rebuild_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, description,
                                     out, max_seqlen_q, max_seqlen_k, flags)
    target = rebuild_out_struct(k_out, v_out, out_block_table)
    context = default_context()
    _launch(q.device, lambda call_params, stream: context.launch_k_from_v_rebuild(call_params, target, stream),
            params)


def _validate_k_from_v_call(params):
    """Validates a K-from-V call's params as wideattn_prefill does (validate_prefill), without
    asking for a kernel that serves the call itself (wideattn_k_from_v_rebuild serves any number of
    query tokens): the library's UnsupportedError is not raised."""
    try:
        validate_prefill(params)
    except errors.UnsupportedError:
        pass


def _rebuild_metadata_check(cu_seqlens_q, seq_lens_k, block_table, out_block_table, total_q, v_layout, out_blocks):
    """Checked mode of the CPU rebuild: the library's rules on the call's metadata, then on
    out_block_table (the same lengths, entries below out_blocks), its message prefixed "out: "."""
    error = reference.metadata_error(cu_seqlens_q, seq_lens_k, block_table, total_q, v_layout[2], v_layout[1])
    if error is None:
        error = reference.metadata_error(cu_seqlens_q, seq_lens_k, out_block_table, total_q, v_layout[2], out_blocks)
        error = None if error is None else "out: " + error
    if error is not None:
        raise errors.invalid_argument("wideattn_k_from_v_rebuild", error)


def _k_from_v_rebuild_cpu(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, k_norm_scale, inv_freq,
                          rope_theta, rotary_dims, out, k_out, v_out, out_block_table, max_seqlen_q=0, max_seqlen_k=0,
                          flags=0, cos_sin=None):
    """What the rebuild kernel writes (include/wideattn.h, wideattn_k_from_v_rebuild): for sequence s,
    its L = seq_lens_k[s] keys clamped to 0 .. the keys both tables' rows address, V read through
    block_table and v_layout in float32 (an e4m3 code x v_scale, one rounding; a page outside the
    cache reads as zeros), K = reference.k_from_v_keys of it at positions 0 .. L - 1, V written as
    bf16, both at out_block_table's pages (a page outside k_out is skipped)."""
    description = k_from_v_struct(k_norm_scale, inv_freq, rope_theta, rotary_dims, cos_sin)
    _validate_k_from_v_call(k_from_v_rebuild_params(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale,
                                                    description, out, max_seqlen_q, max_seqlen_k, flags))
    if flags & _capi.FLAG_CHECK_METADATA:
        _rebuild_metadata_check(cu_seqlens_q, seq_lens_k, block_table, out_block_table, q.shape[0], v_layout,
                                k_out.shape[0])
    head_dim = q.shape[2]
    _, num_blocks, block_size = v_layout[:3]
    frequencies = reference.k_from_v_inv_freq(head_dim, rotary_dims, rope_theta, inv_freq)
    src_stride, dst_stride = block_table.stride(0), out_block_table.stride(0)
    src_rows, dst_rows = reference._flat(block_table), reference._flat(out_block_table)
    row_keys = min(src_stride, dst_stride) * block_size
    for s, length in enumerate(seq_lens_k.tolist()):
        keys = min(max(length, 0), row_keys)
        if keys == 0:
            continue
        pages = -(-keys // block_size)
        src = src_rows[s * src_stride:s * src_stride + pages].long()
        dst = dst_rows[s * dst_stride:s * dst_stride + pages].long()
        page_of_key = torch.arange(keys) // block_size
        src_ok = ((src >= 0) & (src < num_blocks))[page_of_key]
        values = reference.gather_keys(v, v_layout, src.clamp(0, num_blocks - 1), keys, head_dim, torch.float32,
                                       v_scale)
        values[~src_ok.to(values.device)] = 0.0
        rebuilt = reference.k_from_v_keys(values, torch.arange(keys), k_norm_scale, frequencies, cos_sin)
        keep = ((dst >= 0) & (dst < k_out.shape[0]))[page_of_key]
        pages_out = dst[page_of_key][keep].to(k_out.device)
        slots_out = (torch.arange(keys) % block_size)[keep].to(k_out.device)
        k_out[pages_out, slots_out] = rebuilt[keep.to(rebuilt.device)].to(k_out.device)
        v_out[pages_out, slots_out] = values[keep.to(values.device)].bfloat16().to(v_out.device)


def _k_from_v_rebuild_fake(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, v_scale, k_norm_scale, inv_freq,
                           rope_theta, rotary_dims, out, k_out, v_out, out_block_table, max_seqlen_q=0,
                           max_seqlen_k=0, flags=0, cos_sin=None):
    return None


def _k_from_v_fake(q, v, cu_seqlens_q, seq_lens_k, block_table, v_layout, softmax_scale, v_scale, k_norm_scale,
                   inv_freq, rope_theta, rotary_dims, out, lse, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, flags=0,
                   cos_sin=None):
    return None


OP_SCHEMAS = {
    "prefill": ("prefill(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor seq_lens_k, "
                "Tensor block_table, SymInt[] k_layout, SymInt[] v_layout, float softmax_scale, "
                "Tensor? q_scale, Tensor? k_scale, Tensor? v_scale, Tensor(a!) out, Tensor(b!)? lse, "
                "SymInt max_seqlen_q=0, SymInt max_seqlen_k=0, int num_splits=0, int flags=0) -> ()",
                _prefill_cuda, _prefill_cpu, _prefill_fake),
    "quantize_to_cache": ("quantize_to_cache(Tensor src, Tensor(a!) cache, Tensor? slot_mapping, Tensor scale, "
                          "SymInt[] cache_layout, Tensor(b!)? nonfinite_count) -> ()",
                          _quantize_cuda, _quantize_cpu, _no_output),
    "compute_scale": ("compute_scale(Tensor src, Tensor? slot_mapping, Tensor(a!) scale, "
                      "Tensor(b!)? nonfinite_count, bool power_of_two=False) -> ()",
                      _scale_cuda, _scale_cpu, _no_output),
    "prefill_packed": ("prefill_packed(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor seq_lens_k, "
                       "Tensor block_table, Tensor(a!) out, int[] config, float softmax_scale) -> ()",
                       _packed_cuda, _packed_cpu, _packed_fake),
    "prefill_k_from_v": ("prefill_k_from_v(Tensor q, Tensor v, Tensor cu_seqlens_q, Tensor seq_lens_k, "
                         "Tensor block_table, SymInt[] v_layout, float softmax_scale, Tensor? v_scale, "
                         "Tensor k_norm_scale, Tensor? inv_freq, float rope_theta, int rotary_dims, "
                         "Tensor(a!) out, Tensor(b!)? lse, SymInt max_seqlen_q=0, SymInt max_seqlen_k=0, "
                         "int num_splits=0, int flags=0, Tensor? cos_sin=None) -> ()",
                         _k_from_v_cuda, _k_from_v_cpu, _k_from_v_fake),
    "k_from_v_rebuild": ("k_from_v_rebuild(Tensor q, Tensor v, Tensor cu_seqlens_q, Tensor seq_lens_k, "
                         "Tensor block_table, SymInt[] v_layout, Tensor? v_scale, Tensor k_norm_scale, "
                         "Tensor? inv_freq, float rope_theta, int rotary_dims, Tensor out, Tensor(a!) k_out, "
                         "Tensor(b!) v_out, Tensor out_block_table, SymInt max_seqlen_q=0, SymInt max_seqlen_k=0, "
                         "int flags=0, Tensor? cos_sin=None) -> ()",
                         _k_from_v_rebuild_cuda, _k_from_v_rebuild_cpu, _k_from_v_rebuild_fake),
}


def _register_fake(library, name, function):
    """The op's fake (shape-inference) implementation: register_fake (torch >= 2.4), impl_abstract
    (2.1 .. 2.3), else a Meta kernel (older torch, e.g. Debian's 1.13)."""
    qualified = f"{NAMESPACE}::{name}"
    if hasattr(torch.library, "register_fake"):
        torch.library.register_fake(qualified, function, lib=library)
    elif hasattr(torch.library, "impl_abstract"):
        torch.library.impl_abstract(qualified, function, lib=library)
    else:
        library.impl(name, function, "Meta")
        library.impl(name, function, "AutogradMeta")


def _register():
    library = torch.library.Library(NAMESPACE, "DEF")
    for name, (schema, cuda, cpu, fake) in OP_SCHEMAS.items():
        library.define(schema)
        library.impl(name, cuda, "CUDA")
        library.impl(name, cpu, "CPU")
        _register_fake(library, name, fake)
    return library


_LIBRARY = _register()
_prefill_op = torch.ops.wideattn.prefill.default
# wideattn::prefill_packed as the Python entry points call it: the Python op (PYTHON_PACKED_OP), or
# the C++ op once wideattn.cpp_ops is loaded.
PYTHON_PACKED_OP = torch.ops.wideattn.prefill_packed.default
_prefill_packed_op = PYTHON_PACKED_OP
_quantize_op = torch.ops.wideattn.quantize_to_cache.default
_scale_op = torch.ops.wideattn.compute_scale.default
_k_from_v_op = torch.ops.wideattn.prefill_k_from_v.default
_k_from_v_rebuild_op = torch.ops.wideattn.k_from_v_rebuild.default

# torch.compiler.is_compiling (torch >= 2.1; None before): the Python entry points run
# wideattn::prefill_packed only where it is false (module docstring).
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)

# $WIDEATTN_CPP_OPS=1: build (first time) and load the C++ op now (wideattn.cpp_ops); a failure is a
# warning and the Python op stays.
if switch_from_env(ENV_CPP_OPS, "build and load the C++ op wideattn_cpp::prefill_packed"):
    from . import cpp_ops as _cpp_ops
    _cpp_ops.load_or_warn()

