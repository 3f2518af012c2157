"""test_plans.py - wideattn.Context.plan / Plan.run through the stand-in driver
(tests/fake_driver/, WIDEATTN_LIBCUDA; tests/meson.build): a plan of a decode step runs per layer
with each layer's pointers (the stand-in records the launches), reports what it launches, refuses
a cache of another layout (run_tensors) and bad run pointers with the library's message, and once
closed (itself, or by its context's close) is refused by the library, never dereferenced.
No torch needed.

usage: python3 test_plans.py FAKE_LIBCUDA
"""

import ctypes
import sys

import harness

import wideattn  # noqa: E402
from wideattn import _capi  # noqa: E402

FAKE = ctypes.CDLL(sys.argv[1])
FAKE.fake_cuda_take_launches.restype = ctypes.c_char_p
Q, K0, V0, O, TABLE = 0x10000000, 0x100000000, 0x140000000, 0x40000000, 0x50002000


def step_params():
    """A decode step of 4 sequences over 256 keys (Gemma 4 31B global-layer heads, page 16)
    without the run's tensors."""
    hq, hkv, d, page = 32, 4, 512, 16
    p = _capi.PrefillParams()
    p.q_token_stride, p.q_head_stride = hq * d, d
    p.k_block_stride = p.v_block_stride = page * hkv * d
    p.k_slot_stride = p.v_slot_stride = hkv * d
    p.k_head_stride = p.v_head_stride = d
    p.o_token_stride, p.o_head_stride = hq * d, d
    p.cu_seqlens_q, p.seq_lens_k, p.block_table, p.block_table_stride = 0x50000000, 0x50001000, TABLE, 16
    p.num_seqs, p.total_q, p.num_q_heads, p.num_kv_heads, p.head_dim = 4, 4, hq, hkv, d
    p.block_size, p.num_blocks = page, 64
    p.q_dtype = p.kv_dtype = p.o_dtype = _capi.DTYPE_BF16
    p.softmax_scale, p.max_seqlen_q, p.max_seqlen_k = 1.0, 1, 256
    return p


def layer(i):
    return Q, K0 + i * 0x1000000, V0 + i * 0x1000000, O


def tma_kernel(context):
    return any(k.name == "wgmma_bf16_d512" and k.arch == "sm_90a" for k in context.kernels())


def test_a_plan_runs_per_layer():
    with wideattn.Context() as context:
        if not tma_kernel(context):
            print("skipped: no wgmma_bf16_d512 for sm_90a in the bundle")
            return
        # The kernel that reads K/V by TMA, whose tensor maps a plan caches (a BF16 single-token step
        # otherwise goes to decode_bf16w4_d512, which reads them by cp.async).
        context.set_prefill_kernel("wgmma_bf16_d512")
        FAKE.fake_cuda_take_launches()
        plan = context.plan(step_params(), caches=[layer(i)[1:3] for i in range(10)])
        info = plan.info()
        assert info.launch.num_splits == 1 and not info.has_lse and info.tma_kv and info.num_cached_maps == 10, info
        assert context.kernels()[info.launch.kernel_index].name == "wgmma_bf16_d512"
        for i in range(10):
            plan.run(*layer(i), stream=0)
        launches = FAKE.fake_cuda_take_launches().decode().splitlines()
        assert launches == ["wideattn_wgmma_bf16_d512 4 4 1"] * 10, launches
        plan.close()
        plan.close()   # harmless


def test_refusals_name_the_argument():
    with wideattn.Context() as context:
        if not tma_kernel(context):
            return
        plan = context.plan(step_params())
        harness.expect_raises(wideattn.InvalidArgumentError, ["o=0x40000008 is not 16-byte aligned"], plan.run,
                              Q, K0, V0, O + 8)
        harness.expect_raises(wideattn.InvalidArgumentError, ["o (bytes 0x50002000..", "overlaps block_table"],
                              plan.run, Q, K0, V0, TABLE)
        harness.expect_raises(wideattn.InvalidArgumentError, ["lse=0x70000000 is set but the plan was created "
                                                              "without an lse"], plan.run, Q, K0, V0, O, 0x70000000)
        tensors = _capi.PlanTensors(q=Q, k_cache=K0, v_cache=V0, o=O, num_blocks=128)
        harness.expect_raises(wideattn.InvalidArgumentError, ["tensors.num_blocks=128 differs from the plan's 64"],
                              plan.run_tensors, tensors)
        tensors.num_blocks = 64
        plan.run_tensors(tensors)
        # A destroyed plan's handle is refused by the library.
        stale = wideattn.Plan(context, plan.handle)
        plan.close()
        harness.expect_raises(wideattn.InvalidArgumentError, ["no longer live: it was destroyed"], stale.run, *layer(0))
        stale.handle = None
        bad = step_params()
        bad.block_size = 8
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_plan_create", "block_size=8"], context.plan, bad)


def test_closing_the_context_destroys_its_plans():
    context = wideattn.Context()
    if not tma_kernel(context):
        context.close()
        return
    plan = context.plan(step_params())
    stale = wideattn.Plan(context, plan.handle)
    context.close()
    assert plan.handle is None
    harness.expect_raises(wideattn.InvalidArgumentError, ["no longer live"], stale.run, *layer(0))
    stale.handle = None


def test_closing_a_plan_and_setting_debug_mode_call_the_hooks():
    # wideattn.library.plan_close_hooks / debug_hooks (how wideattn.cpp_ops forgets plan handles and
    # follows debug mode): each closed plan calls every close hook once, a second close none;
    # set_debug calls every debug hook with the new setting. Plan.run_address is the address of the
    # library's wideattn_plan_run.
    from wideattn import library
    closed, debug = [], []
    library.plan_close_hooks.append(lambda: closed.append(1))
    library.debug_hooks.append(debug.append)
    try:
        context = wideattn.Context()
        if not tma_kernel(context):
            context.close()
            return
        first, second = context.plan(step_params()), context.plan(step_params())
        expected = ctypes.cast(context._lib.wideattn_plan_run, ctypes.c_void_p).value
        assert first.run_address() == expected and expected, (first.run_address(), expected)
        first.close()
        first.close()
        assert closed == [1], closed
        context.close()   # closes `second` with it
        assert closed == [1, 1] and second.handle is None, closed
        previous = wideattn.set_debug(True)
        wideattn.set_debug(previous)
        assert debug == [True, previous], debug
    finally:
        library.plan_close_hooks.pop()
        library.debug_hooks.pop()


if __name__ == "__main__":
    harness.run(dict(globals()))
