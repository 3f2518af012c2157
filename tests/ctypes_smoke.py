"""ctypes_smoke.py - loads libwideattn from Python with ctypes on a machine without a CUDA
driver (or with WIDEATTN_LIBCUDA pointing nowhere): open the bundle, list kernels, check that
is_supported answers and that a launch returns WIDEATTN_ERROR_NO_DRIVER with a message.

usage: python3 ctypes_smoke.py PATH/libwideattn.so
"""
import ctypes
import sys

WIDEATTN_OK = 0
WIDEATTN_ERROR_INVALID_ARGUMENT = 1
WIDEATTN_ERROR_NO_DRIVER = 3
DTYPE_BF16, DTYPE_F64 = 0, 3


class PrefillParams(ctypes.Structure):
    """Mirror of wideattn_prefill_params (dispatch/wideattn.h), field for field."""
    _fields_ = [
        ("q", ctypes.c_void_p), ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
        ("k_cache", ctypes.c_void_p), ("k_block_stride", ctypes.c_int64), ("k_slot_stride", ctypes.c_int64),
        ("k_head_stride", ctypes.c_int64),
        ("v_cache", ctypes.c_void_p), ("v_block_stride", ctypes.c_int64), ("v_slot_stride", ctypes.c_int64),
        ("v_head_stride", ctypes.c_int64),
        ("o", ctypes.c_void_p), ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
        ("lse", ctypes.c_void_p), ("lse_head_stride", ctypes.c_int64),
        ("cu_seqlens_q", ctypes.c_void_p), ("seq_lens_k", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p), ("block_table_stride", ctypes.c_int64),
        ("q_scale", ctypes.c_void_p), ("k_scale", ctypes.c_void_p), ("v_scale", ctypes.c_void_p),
        ("num_seqs", ctypes.c_int32), ("total_q", ctypes.c_int32), ("num_q_heads", ctypes.c_int32),
        ("num_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32), ("block_size", ctypes.c_int32),
        ("num_blocks", ctypes.c_int32), ("q_dtype", ctypes.c_int32), ("kv_dtype", ctypes.c_int32),
        ("o_dtype", ctypes.c_int32), ("softmax_scale", ctypes.c_float), ("reserved", ctypes.c_int32),
    ]


EXPECTED_PARAMS_SIZE = 232  # 23 eight-byte fields + 12 four-byte fields (static_assert in dispatch/api.cpp)


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.wideattn_version.restype = ctypes.c_char_p
    lib.wideattn_last_error.restype = ctypes.c_char_p
    lib.wideattn_status_string.restype = ctypes.c_char_p
    lib.wideattn_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.wideattn_kernel_count.argtypes = [ctypes.c_void_p]
    lib.wideattn_prefill.argtypes = [ctypes.c_void_p, ctypes.POINTER(PrefillParams), ctypes.c_void_p]
    lib.wideattn_is_supported.argtypes = [ctypes.c_void_p, ctypes.POINTER(PrefillParams), ctypes.c_int,
                                          ctypes.c_int, ctypes.POINTER(ctypes.c_int32)]
    lib.wideattn_close.argtypes = [ctypes.c_void_p]

    if ctypes.sizeof(PrefillParams) != EXPECTED_PARAMS_SIZE:
        fail(f"ctypes struct is {ctypes.sizeof(PrefillParams)} bytes, expected {EXPECTED_PARAMS_SIZE}")
    print("version", lib.wideattn_version().decode())
    ctx = ctypes.c_void_p()
    status = lib.wideattn_open(ctypes.byref(ctx), None)
    if status != WIDEATTN_OK:
        fail(f"open: {lib.wideattn_last_error().decode()}")
    count = lib.wideattn_kernel_count(ctx)
    if count < 1:
        fail("bundle has no kernels")
    print("kernels", count)

    p = PrefillParams()
    p.q, p.k_cache, p.v_cache, p.o = 0x10000000, 0x20000000, 0x30000000, 0x40000000
    p.cu_seqlens_q, p.seq_lens_k, p.block_table = 0x50000000, 0x50001000, 0x50002000
    p.block_table_stride = 4
    p.q_token_stride = p.o_token_stride = 32 * 512
    p.q_head_stride = p.o_head_stride = p.k_head_stride = p.v_head_stride = 512
    p.k_block_stride = p.v_block_stride = 16 * 4 * 512
    p.k_slot_stride = p.v_slot_stride = 4 * 512
    p.num_seqs, p.total_q, p.num_q_heads, p.num_kv_heads = 1, 10, 32, 4
    p.head_dim, p.block_size, p.num_blocks = 512, 16, 4
    p.q_dtype, p.kv_dtype, p.o_dtype = DTYPE_BF16, DTYPE_BF16, DTYPE_F64
    p.softmax_scale = 1.0

    index = ctypes.c_int32(-1)
    if lib.wideattn_is_supported(ctx, ctypes.byref(p), 9, 0, ctypes.byref(index)) != WIDEATTN_OK:
        fail(f"is_supported: {lib.wideattn_last_error().decode()}")
    status = lib.wideattn_prefill(ctx, ctypes.byref(p), None)
    message = lib.wideattn_last_error().decode()
    print("prefill:", lib.wideattn_status_string(status).decode(), message)
    if status != WIDEATTN_ERROR_NO_DRIVER or "CUDA driver not available" not in message:
        fail("expected WIDEATTN_ERROR_NO_DRIVER")
    p.block_size = 24
    if lib.wideattn_prefill(ctx, ctypes.byref(p), None) != WIDEATTN_ERROR_INVALID_ARGUMENT:
        fail("block_size=24 accepted")
    if lib.wideattn_last_error().decode() != "block_size=24 is not a positive multiple of 16":
        fail(f"unexpected message {lib.wideattn_last_error()!r}")
    lib.wideattn_close(ctx)
    print("ok")


if __name__ == "__main__":
    main()
