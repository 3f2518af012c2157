"""test_package.py - the wideattn Python package without torch and without a driver: the ctypes
mirrors against the C compiler's layout, kernels() against the bundle's manifest, the library
and bundle lookup order, errors per status carrying the library's message, kernel selection
and pinning through is_supported, split-KV planning (plan_launch, workspace sizes, validation
of the split fields), the K-from-V rebuild's validation (wideattn_k_from_v_rebuild), and that none
of it imports torch.

usage: python3 test_package.py STRUCT_LAYOUT_BINARY   (PYTHONPATH = build/python,
       WIDEATTN_BUNDLE = build/bundle, WIDEATTN_LIBCUDA pointing nowhere)
"""

import ctypes
import json
import os
import subprocess
import sys

import harness

harness.block_torch()
import wideattn  # noqa: E402
from wideattn import _capi, library  # noqa: E402

STRUCTS = {"wideattn_prefill_params": _capi.PrefillParams, "wideattn_quantize_params": _capi.QuantizeParams,
           "wideattn_scale_params": _capi.ScaleParams, "wideattn_kernel_info": _capi.KernelInfoStruct,
           "wideattn_launch_plan": _capi.LaunchPlan, "wideattn_plan_options": _capi.PlanOptions,
           "wideattn_plan_tensors": _capi.PlanTensors, "wideattn_plan_info": _capi.PlanInfo,
           "wideattn_k_from_v": _capi.KFromV, "wideattn_k_from_v_rebuild_out": _capi.KFromVRebuildOut}
FAKE_BASE = 0x10000000           # device addresses the no-driver calls never touch
GEMMA_GLOBAL = {"num_q_heads": 32, "num_kv_heads": 4, "head_dim": 512}


def fake_params(o_dtype=_capi.DTYPE_BF16, kv_dtype=_capi.DTYPE_BF16, block_size=16):
    """A valid Gemma 4 global-layer call (10 tokens, one sequence) on fake device pointers."""
    hq, hkv, d = GEMMA_GLOBAL["num_q_heads"], GEMMA_GLOBAL["num_kv_heads"], GEMMA_GLOBAL["head_dim"]
    p = _capi.PrefillParams()
    p.q, p.k_cache, p.v_cache, p.o = FAKE_BASE, 2 * FAKE_BASE, 3 * FAKE_BASE, 4 * FAKE_BASE
    p.cu_seqlens_q, p.seq_lens_k, p.block_table = 5 * FAKE_BASE, 5 * FAKE_BASE + 4096, 5 * FAKE_BASE + 8192
    p.block_table_stride = 4
    p.q_token_stride = p.o_token_stride = hq * d
    p.q_head_stride = p.o_head_stride = p.k_head_stride = p.v_head_stride = d
    p.k_block_stride = p.v_block_stride = block_size * hkv * d
    p.k_slot_stride = p.v_slot_stride = hkv * d
    p.num_seqs, p.total_q, p.num_q_heads, p.num_kv_heads = 1, 10, hq, hkv
    p.head_dim, p.block_size, p.num_blocks = d, block_size, 4
    p.q_dtype, p.kv_dtype, p.o_dtype = _capi.DTYPE_BF16, kv_dtype, o_dtype
    if kv_dtype == _capi.DTYPE_E4M3:
        p.k_scale, p.v_scale = 6 * FAKE_BASE, 6 * FAKE_BASE + 16
    p.softmax_scale = 1.0
    return p


def test_struct_layouts_match_the_compiler():
    layout = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
    for c_name, struct in STRUCTS.items():
        expected = layout[c_name]
        assert ctypes.sizeof(struct) == expected["size"], (c_name, ctypes.sizeof(struct), expected["size"])
        mirrored = [name for name, _ in struct._fields_]
        assert mirrored == list(expected["fields"]), (c_name, mirrored, list(expected["fields"]))
        for name, offset in expected["fields"].items():
            assert getattr(struct, name).offset == offset, (c_name, name, getattr(struct, name).offset, offset)
        assert _capi.EXPECTED_SIZES[c_name][1] == expected["size"]
    assert sorted(layout) == sorted(STRUCTS), (sorted(layout), sorted(STRUCTS))


def test_kernels_list_the_manifest():
    bundle = os.environ["WIDEATTN_BUNDLE"]
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)["kernels"]
    listed = wideattn.kernels()
    assert [(k.name, k.arch, k.kind) for k in listed] == [(m["name"], m["arch"], m["kind"]) for m in manifest]
    for kernel, entry in zip(listed, manifest):
        assert (kernel.q_dtype, kernel.kv_dtype, kernel.o_dtype) == (entry["q_dtype"], entry["kv_dtype"],
                                                                     entry["o_dtype"])
        assert kernel.head_dim == (entry["head_dim"]["min"], entry["head_dim"]["max"], entry["head_dim"]["step"])
        assert kernel.group == (entry["group"]["min"], entry["group"]["max"])
        assert list(kernel.features) == entry["features"], (kernel.features, entry["features"])
        assert kernel.threads == entry["threads"] and kernel.dynamic_smem == entry["dynamic_smem"]
        assert kernel.cubin == entry["cubin"] and kernel.symbol == entry["symbol"]
    assert any(k.name == "reference_f64" for k in listed)
    assert "reference_f64" in repr(listed[0]) or "reference_f64" in repr(listed)
    assert os.path.samefile(wideattn.default_context().bundle_dir, bundle)


def test_version_is_the_library_version():
    assert wideattn.version() == wideattn.__version__, (wideattn.version(), wideattn.__version__)


def test_torch_is_not_imported():
    assert "torch" not in sys.modules
    harness.expect_raises(ImportError, ["torch"], getattr, wideattn, "prefill")


def test_library_lookup_order():
    configured = library.library_candidates()[-1]
    assert configured[1].startswith("the build tree location"), configured
    explicit = library.library_candidates("/some/explicit/libwideattn.so")
    assert explicit[0] == ("/some/explicit/libwideattn.so", "the library argument")
    harness.expect_raises(wideattn.LibraryNotFoundError, ["/nonexistent/libwideattn.so", "the library argument",
                                                          "no such file"],
                          wideattn.Context, library="/nonexistent/libwideattn.so")
    os.environ[library.ENV_LIBRARY] = "/nonexistent/env/libwideattn.so"
    try:
        candidates = library.library_candidates()
        assert candidates[0] == ("/nonexistent/env/libwideattn.so", "$WIDEATTN_LIB"), candidates
        harness.expect_raises(wideattn.LibraryNotFoundError, ["/nonexistent/env/libwideattn.so", "$WIDEATTN_LIB"],
                              wideattn.Context)
        # The argument comes before the environment.
        with wideattn.Context(library=configured[0]) as context:
            assert context.kernels()
    finally:
        del os.environ[library.ENV_LIBRARY]


def test_bundle_errors_carry_the_library_message():
    error = harness.expect_raises(wideattn.BundleError, ["wideattn_open", "WIDEATTN_ERROR_BUNDLE",
                                                         "/nonexistent/bundle"],
                                  wideattn.Context, bundle="/nonexistent/bundle")
    assert error.status == _capi.STATUS_BUNDLE and error.status_name == "WIDEATTN_ERROR_BUNDLE"


def test_launch_without_a_driver():
    context = wideattn.default_context()
    error = harness.expect_raises(wideattn.NoDriverError, ["wideattn_prefill", "CUDA driver not available"],
                                  context.launch_prefill, fake_params(), None)
    assert error.status == _capi.STATUS_NO_DRIVER


def test_invalid_argument_is_a_value_error_with_the_message():
    context = wideattn.default_context()
    error = harness.expect_raises(ValueError, ["block_size=24 is not a positive multiple of 16"],
                                  context.launch_prefill, fake_params(block_size=24), None)
    assert isinstance(error, wideattn.InvalidArgumentError) and error.status == _capi.STATUS_INVALID_ARGUMENT
    harness.expect_raises(wideattn.InvalidArgumentError, ["block_size=24"], context.is_supported,
                          fake_params(block_size=24), (9, 0))


def test_selection_and_pinning():
    with wideattn.Context() as context:
        assert context.is_supported(fake_params(o_dtype=_capi.DTYPE_F64), (9, 0)).name == "reference_f64"
        assert context.is_supported(fake_params(), (9, 0)).name == "wgmma_bf16c2p_d512"
        assert context.prefill_kernel is None
        context.set_prefill_kernel("mma_bf16_d512")
        assert context.prefill_kernel == "mma_bf16_d512"
        assert context.is_supported(fake_params(), (9, 0)).name == "mma_bf16_d512"
        assert context.is_supported(fake_params(o_dtype=_capi.DTYPE_F64), (9, 0)).name == "reference_f64"
        context.set_prefill_kernel(None)
        assert context.prefill_kernel is None
        assert context.is_supported(fake_params(), (9, 0)).name == "wgmma_bf16c2p_d512"
        harness.expect_raises(wideattn.InvalidArgumentError, ["no_such_kernel", "mma_bf16_d512"],
                              context.set_prefill_kernel, "no_such_kernel")
        assert context.prefill_kernel is None       # a refused name changes nothing
        harness.expect_raises(wideattn.UnsupportedError, ["wideattn_is_supported"], context.is_supported,
                              fake_params(), (8, 0))


def k_from_v_call(description):
    """fake_params as a K-from-V call (k_cache NULL, WIDEATTN_FLAG_K_FROM_V) with `description` (a
    _capi.KFromV the caller keeps alive: Gemma 4's, its weight at a fake address)."""
    p = fake_params()
    p.k_cache, p.k_block_stride, p.k_slot_stride, p.k_head_stride = None, 0, 0, 0
    p.flags = _capi.FLAG_K_FROM_V
    p.k_from_v = ctypes.pointer(description)
    return p


def gemma4_description():
    return _capi.KFromV(ctypes.sizeof(_capi.KFromV), _capi.ROPE_PROPORTIONAL, 6 * FAKE_BASE, 1.0e6, 128,
                        _capi.ROPE_ROTATE_HALF, 0, None, None, 0, 0)


def rebuild_out(**fields):
    """A wideattn_k_from_v_rebuild_out of bf16 caches of 4 pages shaped as fake_params' cache, at
    fake addresses, and a table of 4 entries per sequence."""
    hkv, d, block_size = GEMMA_GLOBAL["num_kv_heads"], GEMMA_GLOBAL["head_dim"], 16
    out = _capi.KFromVRebuildOut(0, 0, 8 * FAKE_BASE, block_size * hkv * d, hkv * d, d,
                                 9 * FAKE_BASE, block_size * hkv * d, hkv * d, d, 10 * FAKE_BASE, 4, 4, 0)
    for name, value in fields.items():
        setattr(out, name, value)
    return out


def test_scale_and_its_power_of_two_are_validated_before_the_driver_loads():
    """Context.launch_scale: wideattn_compute_scale, and with power_of_two=True
    wideattn_compute_scale_pow2 (C API 0.9.0): a valid call reaches the driver (absent here), a
    refusal names the function and the field."""
    context = wideattn.default_context()
    heads, dim = GEMMA_GLOBAL["num_kv_heads"], GEMMA_GLOBAL["head_dim"]
    p = _capi.ScaleParams(src=FAKE_BASE, src_token_stride=heads * dim, src_head_stride=dim, scale=2 * FAKE_BASE,
                          tokens=10, heads=heads, head_dim=dim, src_dtype=_capi.DTYPE_BF16)
    for power_of_two, name in ((False, "wideattn_compute_scale"), (True, "wideattn_compute_scale_pow2")):
        harness.expect_raises(wideattn.NoDriverError, [name + ":", "CUDA driver not available"],
                              context.launch_scale, p, None, power_of_two=power_of_two)
        bad = _capi.ScaleParams.from_buffer_copy(p)
        bad.scale = None
        harness.expect_raises(wideattn.InvalidArgumentError, [name + ":", "scale is NULL"],
                              context.launch_scale, bad, None, power_of_two=power_of_two)


def test_k_from_v_rebuild_is_validated_before_the_driver_loads():
    """wideattn_k_from_v_rebuild (C API 0.8.0) through Context.launch_k_from_v_rebuild: a valid call
    reaches the driver (absent here), and the library's refusals of params and of out name the
    field; the struct_size is set by the binding."""
    context = wideattn.default_context()
    description = gemma4_description()
    assert ctypes.sizeof(_capi.KFromVRebuildOut) == 96
    out = rebuild_out()
    harness.expect_raises(wideattn.NoDriverError, ["wideattn_k_from_v_rebuild", "CUDA driver not available"],
                          context.launch_k_from_v_rebuild, k_from_v_call(description), out, None)
    assert out.struct_size == 96
    for fields, text in (({"reserved": 1}, "out.reserved=1 must be 0"),
                         ({"reserved2": 3}, "out.reserved2=3 must be 0"),
                         ({"k_cache": None}, "out.k_cache"),
                         ({"num_blocks": 0}, "out.num_blocks=0 must be >= 1"),
                         ({"block_table_stride": 0}, "out.block_table_stride=0 must be >= 1"),
                         ({"v_slot_stride": 2052}, "out.v_slot_stride=2052 is not a multiple of 8 elements"),
                         ({"v_cache": 8 * FAKE_BASE}, "out.k_cache"),
                         ({"k_cache": 3 * FAKE_BASE}, "v_cache")):
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_k_from_v_rebuild", text],
                              context.launch_k_from_v_rebuild, k_from_v_call(description), rebuild_out(**fields), None)
    plain = fake_params()
    harness.expect_raises(wideattn.InvalidArgumentError, ["lacks WIDEATTN_FLAG_K_FROM_V"],
                          context.launch_k_from_v_rebuild, plain, rebuild_out(), None)
    harness.expect_raises(wideattn.InvalidArgumentError, ["out must be a wideattn._capi.KFromVRebuildOut, got "
                                                          "PrefillParams"],
                          context.launch_k_from_v_rebuild, k_from_v_call(description), plain, None)
    harness.expect_raises(wideattn.InvalidArgumentError, ["params must be a wideattn._capi.PrefillParams"],
                          context.launch_k_from_v_rebuild, rebuild_out(), rebuild_out(), None)


PLAN_SMS = 132            # an H200's multiprocessors
FAKE_WORKSPACE = 7 * FAKE_BASE
WORKSPACE_ROUNDING = 256  # docs/design.md: each workspace region is rounded up to 256 bytes


def _round_up(size):
    return -(-size // WORKSPACE_ROUNDING) * WORKSPACE_ROUNDING


def workspace_formula(p, splits):
    """docs/design.md "Split-KV": S x total_q x num_q_heads fp32 rows of head_dim, then an fp32
    LSE per row, each region rounded up to 256 bytes."""
    rows = splits * p.total_q * p.num_q_heads
    return _round_up(rows * p.head_dim * 4) + _round_up(rows * 4)


def decode_params(**fields):
    """fake_params as a decode-sized call with host hints (10 query rows over 4096 keys)."""
    p = fake_params()
    p.max_seqlen_q, p.max_seqlen_k = p.total_q, 4096
    for name, value in fields.items():
        setattr(p, name, value)
    return p


def test_split_plan_without_a_driver():
    context = wideattn.default_context()
    plan = context.plan_launch(fake_params(o_dtype=_capi.DTYPE_F64), (9, 0), PLAN_SMS)
    assert context.kernels()[plan.kernel_index].name == "reference_f64"
    assert (plan.num_splits, plan.merge_kernel_index) == (1, -1), plan
    # Four (token tile, KV head) blocks on 132 SMs: the library wants splits but, without a
    # workspace, runs unsplit; given the workspace it asked for, it splits.
    plan = context.plan_launch(decode_params(), (9, 0), PLAN_SMS)
    assert context.kernels()[plan.kernel_index].name == "wgmma_bf16c2p_d512"
    assert plan.num_splits == 1 and plan.merge_kernel_index == -1 and plan.preferred_splits >= 2, plan
    assert plan.preferred_splits <= 4096 // _capi.MIN_SPLIT_KEYS, plan
    assert plan.workspace_bytes == workspace_formula(decode_params(), plan.preferred_splits), plan
    split = context.plan_launch(decode_params(workspace=FAKE_WORKSPACE, workspace_bytes=plan.workspace_bytes),
                                (9, 0), PLAN_SMS)
    assert split.num_splits == plan.preferred_splits, split
    assert context.kernels()[split.merge_kernel_index].kind == "merge_splits", split
    # Hints only steer: the same call without them plans, and never splits past 128.
    unhinted = context.plan_launch(decode_params(max_seqlen_q=0, max_seqlen_k=0), (9, 0), PLAN_SMS)
    assert 1 <= unhinted.preferred_splits <= _capi.MAX_SPLITS, unhinted


def test_forced_split_counts_plan_exactly():
    context = wideattn.default_context()
    for splits in (1, 2, 7, 33, _capi.MAX_SPLITS):
        bytes_needed = workspace_formula(decode_params(), splits) if splits > 1 else 0
        p = decode_params(num_splits=splits, workspace=FAKE_WORKSPACE if bytes_needed else None,
                          workspace_bytes=bytes_needed)
        plan = context.plan_launch(p, (9, 0), PLAN_SMS)
        assert plan.num_splits == splits, (splits, plan)
        assert (plan.merge_kernel_index == -1) == (splits == 1), (splits, plan)
    p = decode_params(num_splits=7, workspace=FAKE_WORKSPACE, workspace_bytes=workspace_formula(decode_params(), 7))
    assert context.is_supported(p, (9, 0)).name == "wgmma_bf16c2p_d512"


def test_workspace_size_needs_the_device():
    context = wideattn.default_context()
    harness.expect_raises(wideattn.NoDriverError, ["wideattn_workspace_size", "CUDA driver not available"],
                          context.workspace_size, decode_params())


def test_split_fields_are_validated():
    context = wideattn.default_context()
    for fields, text in (({"num_splits": _capi.MAX_SPLITS + 1}, f"num_splits={_capi.MAX_SPLITS + 1}"),
                         ({"num_splits": -1}, "num_splits=-1"),
                         ({"max_seqlen_q": -1}, "max_seqlen_q=-1"),
                         ({"max_seqlen_k": -2}, "max_seqlen_k=-2"),
                         ({"workspace": FAKE_WORKSPACE + 8, "workspace_bytes": 1 << 20}, "workspace"),
                         ({"flags": 8}, "flags=8 has unknown bits 0x8")):
        for call in (lambda p: context.is_supported(p, (9, 0)), lambda p: context.plan_launch(p, (9, 0), PLAN_SMS),
                     lambda p: context.launch_prefill(p, None)):
            harness.expect_raises(wideattn.InvalidArgumentError, [text], call, decode_params(**fields))


def test_argument_types_are_named():
    context = wideattn.default_context()
    for call, arguments, text in (
            (context.is_supported, (fake_params(), 9), "capability must be (major, minor), e.g. (9, 0), got 9"),
            (context.is_supported, ({}, (9, 0)), "params must be a wideattn._capi.PrefillParams, got dict"),
            (context.plan_launch, (fake_params(), (9, "0"), PLAN_SMS), "capability must be (major, minor)"),
            (context.plan_launch, (None, (9, 0), PLAN_SMS), "params must be a wideattn._capi.PrefillParams"),
            (context.set_prefill_kernel, (3,), "name must be a kernel name (str) or None, got int"),
            # ctypes' TypeError or ArgumentError, naming neither the call nor params, up to 5f2c5be.
            (context.workspace_size, ({},), "params must be a wideattn._capi.PrefillParams, got dict"),
            (context.launch_prefill, (_capi.ScaleParams(), None), "params must be a wideattn._capi.PrefillParams"),
            (context.launch_quantize, (fake_params(), None),
             "params must be a wideattn._capi.QuantizeParams, got PrefillParams"),
            (context.launch_scale, (_capi.QuantizeParams(), None),
             "params must be a wideattn._capi.ScaleParams, got QuantizeParams")):
        harness.expect_raises(wideattn.InvalidArgumentError, [text], call, *arguments)


def test_closed_context_refuses_calls():
    """Every method and property of a closed context says so, naming itself (workspace_size and
    the launches used to pass the NULL handle on and report the C library's "ctx is NULL")."""
    context = wideattn.Context()
    context.close()
    calls = {
        "bundle_dir": lambda: context.bundle_dir,
        "kernels": context.kernels,
        "set_prefill_kernel": lambda: context.set_prefill_kernel(None),
        "is_supported": lambda: context.is_supported(fake_params(), (9, 0)),
        "plan_launch": lambda: context.plan_launch(fake_params(), (9, 0), PLAN_SMS),
        "workspace_size": lambda: context.workspace_size(fake_params()),
        "launch_prefill": lambda: context.launch_prefill(fake_params(), None),
        "launch_quantize": lambda: context.launch_quantize(_capi.QuantizeParams(), None),
        "launch_scale": lambda: context.launch_scale(_capi.ScaleParams(), None),
        "launch_k_from_v_rebuild": lambda: context.launch_k_from_v_rebuild(fake_params(), rebuild_out(), None),
        "prefill_kernel": lambda: context.prefill_kernel,
    }
    for name, call in calls.items():
        error = harness.expect_raises(wideattn.InvalidArgumentError, ["the context is closed"], call)
        assert "wideattn.Context." + name in str(error), (name, str(error))
    context.close()


if __name__ == "__main__":
    harness.run(dict(globals()))
