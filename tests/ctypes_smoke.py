"""ctypes_smoke.py - loads libwideattn from Python through the project's ctypes binding
(tools/bench/peers/wideattn_ctypes.py, the one the peer harness uses, with the structs of
python/wideattn/_capi.py) on a machine without a CUDA driver (or with WIDEATTN_LIBCUDA pointing
nowhere): checks the struct sizes, opens the bundle, lists kernels, asks is_supported and
plan_launch, and expects WIDEATTN_ERROR_NO_DRIVER from a launch and from workspace_size and
INVALID_ARGUMENT (with its message) from a bad block size and a bad split count.

usage: python3 ctypes_smoke.py PATH/libwideattn.so
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "bench", "peers"))
import wideattn_ctypes as wa  # noqa: E402


PLAN_SMS = 132   # an H200's multiprocessors


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def fake_params():
    p = wa.PrefillParams()
    p.q, p.k_cache, p.v_cache, p.o = 0x10000000, 0x20000000, 0x30000000, 0x40000000
    p.cu_seqlens_q, p.seq_lens_k, p.block_table = 0x50000000, 0x50001000, 0x50002000
    p.block_table_stride = 4
    p.q_token_stride = p.o_token_stride = 32 * 512
    p.q_head_stride = p.o_head_stride = p.k_head_stride = p.v_head_stride = 512
    p.k_block_stride = p.v_block_stride = 16 * 4 * 512
    p.k_slot_stride = p.v_slot_stride = 4 * 512
    p.num_seqs, p.total_q, p.num_q_heads, p.num_kv_heads = 1, 10, 32, 4
    p.head_dim, p.block_size, p.num_blocks = 512, 16, 4
    p.q_dtype, p.kv_dtype, p.o_dtype = wa.DTYPE_BF16, wa.DTYPE_BF16, wa.DTYPE_F64
    p.softmax_scale = 1.0
    return p


def expect_error(call, status, text):
    try:
        call()
    except wa.WideattnError as error:
        if error.status != status or text not in str(error):
            fail(f"expected status {status} with {text!r}, got {error}")
        return
    fail(f"expected status {status} with {text!r}, the call succeeded")


def main():
    wa.check_layout()
    lib = wa.Library(sys.argv[1], None)  # bundle from WIDEATTN_BUNDLE
    print("version", lib.version(), "bundle", lib.bundle_dir())
    kernels = lib.kernels()
    if not any(k["name"] == "reference_f64" for k in kernels):
        fail(f"no reference_f64 in {[k['name'] for k in kernels]}")
    p = fake_params()
    index = lib.is_supported(p, 9, 0)
    if kernels[index]["name"] != "reference_f64":
        fail(f"is_supported picked {kernels[index]['name']}")
    plan = lib.plan_launch(p, 9, 0, PLAN_SMS)
    if plan.kernel_index != index or plan.num_splits != 1 or plan.merge_kernel_index != -1:
        fail(f"fp64 plan: kernel {plan.kernel_index}, {plan.num_splits} splits, merge {plan.merge_kernel_index}")
    expect_error(lambda: lib.workspace_size(p), wa.STATUS_NO_DRIVER, "CUDA driver not available")
    p.num_splits = wa.MAX_SPLITS + 1
    expect_error(lambda: lib.plan_launch(p, 9, 0, PLAN_SMS), wa.STATUS_INVALID_ARGUMENT,
                 f"num_splits={wa.MAX_SPLITS + 1}")
    p.num_splits = 0
    try:
        lib.prefill(p, 0)
        fail("prefill succeeded without a driver")
    except wa.WideattnError as error:
        print("prefill:", error)
        if error.status != wa.STATUS_NO_DRIVER or "CUDA driver not available" not in str(error):
            fail("expected WIDEATTN_ERROR_NO_DRIVER")
    p.block_size = 24
    try:
        lib.prefill(p, 0)
        fail("block_size=24 accepted")
    except wa.WideattnError as error:
        if error.status != wa.STATUS_INVALID_ARGUMENT or "block_size=24 is not a positive multiple of 16" not in str(error):
            fail(f"unexpected error {error}")
    lib.close()
    print("ok")


if __name__ == "__main__":
    main()
