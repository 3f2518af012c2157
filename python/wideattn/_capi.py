"""ctypes mirror of the C API in include/wideattn.h (0.9.0): status codes, dtypes, the ten
structs and the function declarations. Standard library only, so it loads without torch and
without a GPU; tools/bench/peers/wideattn_ctypes.py loads this file for its structs too.

The struct layouts are checked against the C compiler's sizeof/offsetof of every field by
tests/python/test_package.py (through tests/struct_layout.c); EXPECTED_SIZES holds the sizes
struct_layout prints for the header on LP64 (x86-64, aarch64), checked at load time.
"""

import ctypes

# enum wideattn_status
STATUS_OK = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_UNSUPPORTED = 2
STATUS_NO_DRIVER = 3
STATUS_NO_DEVICE = 4
STATUS_BUNDLE = 5
STATUS_CUDA = 6
STATUS_INTERNAL = 7

# enum wideattn_dtype
DTYPE_BF16 = 0
DTYPE_F16 = 1
DTYPE_F32 = 2
DTYPE_F64 = 3
DTYPE_E4M3 = 4
DTYPE_NAMES = {DTYPE_BF16: "bf16", DTYPE_F16: "f16", DTYPE_F32: "f32", DTYPE_F64: "f64", DTYPE_E4M3: "e4m3"}

# Split-KV (wideattn_prefill_params.num_splits): 0 the library chooses, 1 never split,
# 2 .. MAX_SPLITS exactly that many.
SPLITS_AUTO = 0
SPLITS_NONE = 1
MAX_SPLITS = 128          # WIDEATTN_MAX_SPLITS
MIN_SPLIT_KEYS = 256      # WIDEATTN_MIN_SPLIT_KEYS
WORKSPACE_ALIGNMENT = 16  # bytes, of wideattn_prefill_params.workspace

# wideattn_prefill_params.flags: checked mode (the library copies cu_seqlens_q, seq_lens_k and the
# block table to the host and refuses bad entries before launching; not capturable in a CUDA graph).
FLAG_CHECK_METADATA = 1   # WIDEATTN_FLAG_CHECK_METADATA
# wideattn_prefill_params.flags and wideattn_quantize_params.flags: the transposed e4m3 V cache
# layout (v_cache[block][kv_head][d][slot position], include/wideattn.h; C API 0.4.0).
FLAG_V_TRANSPOSED = 2     # WIDEATTN_FLAG_V_TRANSPOSED
# wideattn_prefill_params.flags: K rebuilt from a V-only cache (wideattn_k_from_v in params.k_from_v,
# k_cache NULL; C API 0.5.0; wideattn_k_from_v.inv_freq 0.6.0, cos_sin 0.7.0).
FLAG_K_FROM_V = 4         # WIDEATTN_FLAG_K_FROM_V
ROPE_PROPORTIONAL = 1     # WIDEATTN_ROPE_PROPORTIONAL (wideattn_k_from_v.rope_type)
ROPE_ROTATE_HALF = 1      # WIDEATTN_ROPE_ROTATE_HALF (wideattn_k_from_v.pairing)
# wideattn_k_from_v.cos_sin (C API 0.7.0): per position rotary_dims / 2 entries of a bf16 cos and a
# bf16 sin, 8-byte aligned, rotary_dims a multiple of 4 (kernels/common/k_from_v.h).
COS_SIN_ENTRY_BYTES = 4         # kCosSinEntryBytes
COS_SIN_ALIGNMENT = 8           # kCosSinAlignment
COS_SIN_ROTARY_DIMS_MULTIPLE = 4  # kCosSinRotaryDimsMultiple

_I64 = ctypes.c_int64
_I32 = ctypes.c_int32
_PTR = ctypes.c_void_p


class KFromV(ctypes.Structure):
    """struct wideattn_k_from_v (versioned), in header order."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("rope_type", ctypes.c_int32), ("k_norm_scale", ctypes.c_void_p),
        ("rope_theta", ctypes.c_float), ("rotary_dims", ctypes.c_int32), ("pairing", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("inv_freq", ctypes.c_void_p),  # C API 0.6.0: the model's fp32 [rotary_dims / 2] table, or NULL
        # C API 0.7.0: the bf16 (cos, sin) table [cos_sin_positions][rotary_dims / 2], or NULL and 0
        ("cos_sin", ctypes.c_void_p), ("cos_sin_positions", ctypes.c_int32), ("reserved2", ctypes.c_int32),
    ]


class PrefillParams(ctypes.Structure):
    """struct wideattn_prefill_params, in header order."""

    _fields_ = [
        ("q", _PTR), ("q_token_stride", _I64), ("q_head_stride", _I64),
        ("k_cache", _PTR), ("k_block_stride", _I64), ("k_slot_stride", _I64), ("k_head_stride", _I64),
        ("v_cache", _PTR), ("v_block_stride", _I64), ("v_slot_stride", _I64), ("v_head_stride", _I64),
        ("o", _PTR), ("o_token_stride", _I64), ("o_head_stride", _I64),
        ("lse", _PTR), ("lse_head_stride", _I64),
        ("cu_seqlens_q", _PTR), ("seq_lens_k", _PTR),
        ("block_table", _PTR), ("block_table_stride", _I64),
        ("q_scale", _PTR), ("k_scale", _PTR), ("v_scale", _PTR),
        ("num_seqs", _I32), ("total_q", _I32), ("num_q_heads", _I32), ("num_kv_heads", _I32),
        ("head_dim", _I32), ("block_size", _I32), ("num_blocks", _I32),
        ("q_dtype", _I32), ("kv_dtype", _I32), ("o_dtype", _I32),
        ("softmax_scale", ctypes.c_float),
        ("max_seqlen_q", _I32), ("max_seqlen_k", _I32), ("num_splits", _I32),
        ("workspace", _PTR), ("workspace_bytes", _I64),
        ("flags", _I32),
        ("k_from_v", ctypes.POINTER(KFromV)),
    ]


class KFromVRebuildOut(ctypes.Structure):
    """struct wideattn_k_from_v_rebuild_out (versioned: struct_size = ctypes.sizeof(KFromVRebuildOut);
    C API 0.8.0), in header order: the bf16 K and V caches (strides in elements) and the int32
    block table wideattn_k_from_v_rebuild writes a K-from-V call's keys into."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("reserved", _I32),
        ("k_cache", _PTR), ("k_block_stride", _I64), ("k_slot_stride", _I64), ("k_head_stride", _I64),
        ("v_cache", _PTR), ("v_block_stride", _I64), ("v_slot_stride", _I64), ("v_head_stride", _I64),
        ("block_table", _PTR), ("block_table_stride", _I64), ("num_blocks", _I32), ("reserved2", _I32),
    ]


class LaunchPlan(ctypes.Structure):
    """struct wideattn_launch_plan, in header order."""

    _fields_ = [
        ("kernel_index", _I32), ("num_splits", _I32), ("merge_kernel_index", _I32), ("preferred_splits", _I32),
        ("workspace_bytes", _I64),
    ]


class QuantizeParams(ctypes.Structure):
    """struct wideattn_quantize_params, in header order."""

    _fields_ = [
        ("src", _PTR), ("src_token_stride", _I64), ("src_head_stride", _I64),
        ("cache", _PTR), ("cache_block_stride", _I64), ("cache_slot_stride", _I64), ("cache_head_stride", _I64),
        ("slot_mapping", _PTR), ("scale", _PTR), ("nonfinite_count", _PTR),
        ("tokens", _I32), ("heads", _I32), ("head_dim", _I32), ("block_size", _I32),
        ("num_blocks", _I32), ("src_dtype", _I32), ("flags", _I32),
    ]


class ScaleParams(ctypes.Structure):
    """struct wideattn_scale_params, in header order."""

    _fields_ = [
        ("src", _PTR), ("src_token_stride", _I64), ("src_head_stride", _I64),
        ("slot_mapping", _PTR), ("scale", _PTR), ("nonfinite_count", _PTR),
        ("tokens", _I32), ("heads", _I32), ("head_dim", _I32), ("src_dtype", _I32),
    ]


class KernelInfoStruct(ctypes.Structure):
    """struct wideattn_kernel_info, in header order."""

    _fields_ = [
        ("name", ctypes.c_char_p), ("symbol", ctypes.c_char_p), ("arch", ctypes.c_char_p),
        ("cubin", ctypes.c_char_p),
        ("q_dtype", _I32), ("kv_dtype", _I32), ("o_dtype", _I32),
        ("head_dim_min", _I32), ("head_dim_max", _I32), ("head_dim_step", _I32),
        ("group_min", _I32), ("group_max", _I32),
        ("tile_tokens", _I32), ("tile_keys", _I32), ("heads_per_block_max", _I32),
        ("threads", _I32), ("dynamic_smem", _I32),
        ("registers", _I32), ("spill_bytes", _I32), ("stack_bytes", _I32),
        ("features", ctypes.c_char_p), ("kind", ctypes.c_char_p),
    ]


# Plans (C API 0.4.0): the most caches wideattn_plan_options may list.
PLAN_MAX_CACHES = 1024        # WIDEATTN_PLAN_MAX_CACHES


class PlanOptions(ctypes.Structure):
    """struct wideattn_plan_options (versioned: struct_size = ctypes.sizeof(PlanOptions))."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("num_caches", _I32), ("reserved", _I32),
        ("k_caches", ctypes.POINTER(_PTR)), ("v_caches", ctypes.POINTER(_PTR)),
    ]


class PlanTensors(ctypes.Structure):
    """struct wideattn_plan_tensors (versioned), in header order."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
        ("q", _PTR), ("k_cache", _PTR), ("v_cache", _PTR), ("o", _PTR), ("lse", _PTR),
        ("k_block_stride", _I64), ("k_slot_stride", _I64), ("k_head_stride", _I64),
        ("v_block_stride", _I64), ("v_slot_stride", _I64), ("v_head_stride", _I64),
        ("num_blocks", _I32), ("block_size", _I32), ("num_kv_heads", _I32), ("head_dim", _I32),
        ("kv_dtype_plus_one", _I32), ("reserved2", _I32),
    ]


class PlanInfo(ctypes.Structure):
    """struct wideattn_plan_info (versioned), in header order."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("has_lse", ctypes.c_uint32), ("launch", LaunchPlan),
        ("num_cached_maps", _I32), ("tma_kv", _I32), ("checked", _I32), ("reserved", _I32),
    ]


# LP64 sizes as tests/struct_layout.c prints them for include/wideattn.h (prefill: softmax_scale
# at 224, the three split-KV int32 at 228..236, workspace at 240, workspace_bytes at 248, flags
# at 256, k_from_v at 264, 272 in all).
EXPECTED_SIZES = {
    "wideattn_prefill_params": (PrefillParams, 272),
    "wideattn_k_from_v": (KFromV, 56),
    "wideattn_k_from_v_rebuild_out": (KFromVRebuildOut, 96),
    "wideattn_quantize_params": (QuantizeParams, 112),
    "wideattn_scale_params": (ScaleParams, 64),
    "wideattn_kernel_info": (KernelInfoStruct, 112),
    "wideattn_launch_plan": (LaunchPlan, 24),
    "wideattn_plan_options": (PlanOptions, 32),
    "wideattn_plan_tensors": (PlanTensors, 120),
    "wideattn_plan_info": (PlanInfo, 48),
}


def check_sizes():
    """Raises RuntimeError when a mirror's size differs from the C layout's."""
    for c_name, (struct, size) in EXPECTED_SIZES.items():
        actual = ctypes.sizeof(struct)
        if actual != size:
            raise RuntimeError(f"ctypes mirror of {c_name} is {actual} bytes, the C struct {size}")


def declare(lib):
    """Sets restype/argtypes of every wideattn_* function on a loaded ctypes.CDLL."""
    ctx_p = ctypes.c_void_p
    signatures = {
        "wideattn_version": (ctypes.c_char_p, []),
        "wideattn_status_string": (ctypes.c_char_p, [ctypes.c_int]),
        "wideattn_last_error": (ctypes.c_char_p, []),
        "wideattn_open": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]),
        "wideattn_close": (None, [ctx_p]),
        "wideattn_bundle_dir": (ctypes.c_char_p, [ctx_p]),
        "wideattn_kernel_count": (_I32, [ctx_p]),
        "wideattn_get_kernel_info": (ctypes.c_int, [ctx_p, _I32, ctypes.POINTER(KernelInfoStruct)]),
        "wideattn_is_supported": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams), ctypes.c_int,
                                                 ctypes.c_int, ctypes.POINTER(_I32)]),
        "wideattn_set_prefill_kernel": (ctypes.c_int, [ctx_p, ctypes.c_char_p]),
        "wideattn_plan_launch": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams), ctypes.c_int, ctypes.c_int,
                                                ctypes.c_int, ctypes.POINTER(LaunchPlan)]),
        "wideattn_workspace_size": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams), ctypes.POINTER(_I64)]),
        "wideattn_prefill": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams), ctypes.c_void_p]),
        "wideattn_quantize_to_cache": (ctypes.c_int, [ctx_p, ctypes.POINTER(QuantizeParams), ctypes.c_void_p]),
        "wideattn_compute_scale": (ctypes.c_int, [ctx_p, ctypes.POINTER(ScaleParams), ctypes.c_void_p]),
        "wideattn_compute_scale_pow2": (ctypes.c_int, [ctx_p, ctypes.POINTER(ScaleParams), ctypes.c_void_p]),
        "wideattn_plan_create": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams), ctypes.POINTER(PlanOptions),
                                                ctypes.POINTER(ctypes.c_void_p)]),
        "wideattn_plan_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
        "wideattn_plan_run_tensors": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(PlanTensors), ctypes.c_void_p]),
        "wideattn_plan_get_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(PlanInfo)]),
        "wideattn_plan_destroy": (ctypes.c_int, [ctypes.c_void_p]),
        "wideattn_k_from_v_cos_sin": (ctypes.c_int, [ctypes.c_float, ctypes.c_void_p, _I32, _I32, _I32,
                                                     ctypes.c_void_p, ctypes.c_size_t]),
        "wideattn_k_from_v_rebuild": (ctypes.c_int, [ctx_p, ctypes.POINTER(PrefillParams),
                                                     ctypes.POINTER(KFromVRebuildOut), ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
