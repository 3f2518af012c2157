"""ctypes binding of libwideattn (the C API in dispatch/wideattn.h).

Mirrors wideattn_prefill_params and wideattn_kernel_info field for field, checks their sizes
and key offsets against the C layout (computed by hand from the header for x86-64 / aarch64
LP64 and confirmed with gcc + offsetof), and wraps the calls the peer harness needs. Imports
only the standard library, so it loads on machines without torch or a GPU.
"""

import ctypes
import os

# Status codes (enum wideattn_status).
STATUS_OK = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_UNSUPPORTED = 2
STATUS_NO_DRIVER = 3
STATUS_NO_DEVICE = 4
STATUS_BUNDLE = 5
STATUS_CUDA = 6
STATUS_INTERNAL = 7

# Element types (enum wideattn_dtype).
DTYPE_BF16 = 0
DTYPE_F16 = 1
DTYPE_F32 = 2
DTYPE_F64 = 3
DTYPE_E4M3 = 4

_I64 = ctypes.c_int64
_I32 = ctypes.c_int32
_PTR = ctypes.c_void_p


class PrefillParams(ctypes.Structure):
    """struct wideattn_prefill_params, in header order."""

    _fields_ = [
        ("q", _PTR),
        ("q_token_stride", _I64),
        ("q_head_stride", _I64),
        ("k_cache", _PTR),
        ("k_block_stride", _I64),
        ("k_slot_stride", _I64),
        ("k_head_stride", _I64),
        ("v_cache", _PTR),
        ("v_block_stride", _I64),
        ("v_slot_stride", _I64),
        ("v_head_stride", _I64),
        ("o", _PTR),
        ("o_token_stride", _I64),
        ("o_head_stride", _I64),
        ("lse", _PTR),
        ("lse_head_stride", _I64),
        ("cu_seqlens_q", _PTR),
        ("seq_lens_k", _PTR),
        ("block_table", _PTR),
        ("block_table_stride", _I64),
        ("q_scale", _PTR),
        ("k_scale", _PTR),
        ("v_scale", _PTR),
        ("num_seqs", _I32),
        ("total_q", _I32),
        ("num_q_heads", _I32),
        ("num_kv_heads", _I32),
        ("head_dim", _I32),
        ("block_size", _I32),
        ("num_blocks", _I32),
        ("q_dtype", _I32),
        ("kv_dtype", _I32),
        ("o_dtype", _I32),
        ("softmax_scale", ctypes.c_float),
        ("reserved", _I32),
    ]


class KernelInfo(ctypes.Structure):
    """struct wideattn_kernel_info, in header order."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("symbol", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("cubin", ctypes.c_char_p),
        ("q_dtype", _I32),
        ("kv_dtype", _I32),
        ("o_dtype", _I32),
        ("head_dim_min", _I32),
        ("head_dim_max", _I32),
        ("head_dim_step", _I32),
        ("group_min", _I32),
        ("group_max", _I32),
        ("tile_tokens", _I32),
        ("tile_keys", _I32),
        ("heads_per_block_max", _I32),
        ("threads", _I32),
        ("dynamic_smem", _I32),
        ("registers", _I32),
        ("spill_bytes", _I32),
        ("stack_bytes", _I32),
        ("features", ctypes.c_char_p),
        ("kind", ctypes.c_char_p),
    ]


# The C layout, by hand from wideattn.h (LP64): params = 23 eight-byte members (pointers and
# int64 strides, offsets 0..176) + 12 four-byte members (offsets 184..228) = 232 bytes;
# kernel_info = 4 pointers (0..24) + 16 int32 (32..92) + 1 pointer (96) = 104 bytes.
# gcc's sizeof/offsetof on the header agree.
EXPECTED_LAYOUT = {
    PrefillParams: (232, {"lse": 112, "q_scale": 160, "num_seqs": 184,
                          "softmax_scale": 224, "reserved": 228}),
    KernelInfo: (112, {"q_dtype": 32, "stack_bytes": 92, "features": 96, "kind": 104}),
}


def check_layout():
    """Raises AssertionError if the ctypes mirrors differ from the C layout."""
    for struct, (size, offsets) in EXPECTED_LAYOUT.items():
        actual = ctypes.sizeof(struct)
        assert actual == size, f"sizeof({struct.__name__}) = {actual}, C layout says {size}"
        for field, offset in offsets.items():
            actual = getattr(struct, field).offset
            assert actual == offset, f"{struct.__name__}.{field} at {actual}, C layout says {offset}"


class WideattnError(RuntimeError):
    """A libwideattn call returned a non-OK status; carries the status and message."""

    def __init__(self, call, status, status_name, message):
        super().__init__(f"{call}: {status_name} ({status}): {message}")
        self.status = status


class Library:
    """A loaded libwideattn and one context opened on a bundle directory."""

    def __init__(self, lib_path, bundle_dir):
        check_layout()
        self._lib = ctypes.CDLL(os.path.abspath(lib_path))
        self._declare()
        self._ctx = ctypes.c_void_p()
        bundle = os.path.abspath(bundle_dir).encode() if bundle_dir else None
        self._check("wideattn_open", self._lib.wideattn_open(ctypes.byref(self._ctx), bundle))

    def _declare(self):
        lib = self._lib
        ctx_p = ctypes.c_void_p
        params_p = ctypes.POINTER(PrefillParams)
        lib.wideattn_version.restype = ctypes.c_char_p
        lib.wideattn_version.argtypes = []
        lib.wideattn_status_string.restype = ctypes.c_char_p
        lib.wideattn_status_string.argtypes = [ctypes.c_int]
        lib.wideattn_last_error.restype = ctypes.c_char_p
        lib.wideattn_last_error.argtypes = []
        lib.wideattn_open.restype = ctypes.c_int
        lib.wideattn_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        lib.wideattn_close.restype = None
        lib.wideattn_close.argtypes = [ctx_p]
        lib.wideattn_bundle_dir.restype = ctypes.c_char_p
        lib.wideattn_bundle_dir.argtypes = [ctx_p]
        lib.wideattn_kernel_count.restype = _I32
        lib.wideattn_kernel_count.argtypes = [ctx_p]
        lib.wideattn_get_kernel_info.restype = ctypes.c_int
        lib.wideattn_get_kernel_info.argtypes = [ctx_p, _I32, ctypes.POINTER(KernelInfo)]
        lib.wideattn_is_supported.restype = ctypes.c_int
        lib.wideattn_is_supported.argtypes = [ctx_p, params_p, ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(_I32)]
        lib.wideattn_prefill.restype = ctypes.c_int
        lib.wideattn_prefill.argtypes = [ctx_p, params_p, ctypes.c_void_p]
        lib.wideattn_set_prefill_kernel.restype = ctypes.c_int
        lib.wideattn_set_prefill_kernel.argtypes = [ctx_p, ctypes.c_char_p]

    def _check(self, call, status):
        if status != STATUS_OK:
            name = self._lib.wideattn_status_string(status).decode()
            message = self._lib.wideattn_last_error().decode()
            raise WideattnError(call, status, name, message)

    def version(self):
        return self._lib.wideattn_version().decode()

    def bundle_dir(self):
        return self._lib.wideattn_bundle_dir(self._ctx).decode()

    def kernels(self):
        """Every kernel of the bundle as a dict of its KernelInfo fields."""
        result = []
        for index in range(self._lib.wideattn_kernel_count(self._ctx)):
            info = KernelInfo()
            self._check("wideattn_get_kernel_info",
                        self._lib.wideattn_get_kernel_info(self._ctx, index, ctypes.byref(info)))
            entry = {}
            for field, _ in KernelInfo._fields_:
                value = getattr(info, field)
                entry[field] = value.decode() if isinstance(value, bytes) else value
            result.append(entry)
        return result

    def set_prefill_kernel(self, name):
        """Restricts prefill selection to the kernel `name` (None: automatic selection)."""
        self._check("wideattn_set_prefill_kernel",
                    self._lib.wideattn_set_prefill_kernel(self._ctx, name.encode() if name else None))

    def is_supported(self, params, cc_major, cc_minor):
        """Index of the kernel that would run these params; raises WideattnError if none."""
        index = _I32(-1)
        self._check("wideattn_is_supported",
                    self._lib.wideattn_is_supported(self._ctx, ctypes.byref(params), cc_major,
                                                    cc_minor, ctypes.byref(index)))
        return index.value

    def prefill(self, params, stream):
        """Queues one launch on `stream` (an integer CUstream handle, 0 = legacy default)."""
        self._check("wideattn_prefill",
                    self._lib.wideattn_prefill(self._ctx, ctypes.byref(params),
                                               ctypes.c_void_p(stream)))

    def close(self):
        if self._ctx:
            self._lib.wideattn_close(self._ctx)
            self._ctx = ctypes.c_void_p()
