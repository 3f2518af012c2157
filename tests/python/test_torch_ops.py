"""test_torch_ops.py - the torch layer of the wideattn package on the CPU (Debian's python3-torch
1.13 here; skipped without torch): the ops' registration and fake implementations, prefill and
varlen_attention against a naive float64 attention (serving-engine cache layouts, shuffled
pages, varlen batches with context and decode), the parameters handed to the library accepted by
its own validation and selecting the expected kernel, argument checks naming the argument, the
library's messages surfacing as exceptions, the split-KV options (hints, num_splits, the
workspace the CUDA implementation sizes and attaches), checked mode (check_metadata: the library's
flag, and the CPU implementation's mirror of its rules and messages; keys it cannot read refused
without it), the e4m3 codec, scale and quantise functions, and K from V (prefill_k_from_v, its
cos / sin table and k_from_v_cos_sin; calls with several query tokens through k_from_v_rebuild,
whose CPU implementation writes what the kernel writes).

usage: python3 test_torch_ops.py   (PYTHONPATH = build/python, WIDEATTN_BUNDLE = build/bundle)
"""

import copy
import ctypes
import math

import harness

harness.require_torch()
import torch  # noqa: E402

import wideattn  # noqa: E402
from wideattn import _capi, _checks, attention, ops, reference  # noqa: E402
from paged_problem import HEAD_DIM, PrefillOps, Problem, assert_close_bf16  # noqa: E402

MIXED = [(7, 40), (1, 33), (4, 20), (17, 17), (0, 5)]   # chunk with context, decode, spec decode, prompt, idle
SM90 = (9, 0)
SM90_SMS = 132            # an H200's multiprocessors


def run_prefill(problem, **kwargs):
    return wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                            problem.block_table, problem.scale, **kwargs)


def test_ops_are_registered_with_mutable_outputs():
    schema = str(torch.ops.wideattn.prefill.default._schema)
    assert "Tensor(a!) out" in schema and "Tensor(b!)? lse" in schema and "SymInt[] k_layout" in schema, schema
    assert "Tensor(a!) cache" in str(torch.ops.wideattn.quantize_to_cache.default._schema)
    assert "Tensor(a!) scale" in str(torch.ops.wideattn.compute_scale.default._schema)


def test_fake_implementation_runs_on_meta_tensors():
    meta = torch.device("meta")
    q = torch.empty((10, 16, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    k = torch.empty((4, 16, 2, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    cu = torch.empty(2, dtype=torch.int32, device=meta)
    lens = torch.empty(1, dtype=torch.int32, device=meta)
    table = torch.empty((1, 4), dtype=torch.int32, device=meta)
    out = wideattn.prefill(q, k, k, cu, lens, table, 1.0)
    assert out.device == meta and tuple(out.shape) == (10, 16, HEAD_DIM) and out.dtype == torch.bfloat16


def test_prefill_matches_naive_attention():
    for layout in ("plain", "vllm", "flashinfer"):
        problem = Problem(MIXED, layout=layout, seed=1)
        out, lse = run_prefill(problem, lse=True)
        expected, expected_lse = problem.expected()
        assert_close_bf16(out, expected, f"prefill ({layout})")
        valid = torch.isfinite(expected_lse)
        assert torch.allclose(lse.double()[valid], expected_lse[valid], atol=1e-4), layout


def test_prefill_writes_given_outputs():
    problem = Problem([(5, 21), (3, 3)], seed=2)
    out = torch.full(problem.q.shape, float("nan"), dtype=torch.bfloat16)
    lse = torch.full((problem.q_heads, problem.q.shape[0] + 3), float("nan"))
    result = run_prefill(problem, out=out, lse=lse, max_seqlen_q=5, max_seqlen_k=21)
    assert result[0] is out and result[1] is lse
    assert torch.isfinite(out.float()).all() and torch.isfinite(lse[:, :problem.q.shape[0]]).all()
    assert torch.isnan(lse[:, problem.q.shape[0]:]).all()       # beyond total_q: untouched


def test_reference_kernel_through_float64_out():
    problem = Problem([(6, 30)], seed=3)
    out = torch.empty(problem.q.shape, dtype=torch.float64)
    run_prefill(problem, out=out)
    expected, _ = problem.expected()
    assert (out - expected).abs().max().item() < 1e-6


def test_varlen_attention_matches_naive():
    problem = Problem(MIXED, seed=4)
    lengths = [length for _, length in MIXED]
    keys = torch.cat([problem.keys(s) for s in range(len(MIXED))]).bfloat16()
    values = torch.cat([problem.values(s) for s in range(len(MIXED))]).bfloat16()
    cu_k = torch.tensor([0] + list(torch.cumsum(torch.tensor(lengths), 0)), dtype=torch.int32)
    out = wideattn.varlen_attention(problem.q, keys, values, problem.cu_seqlens_q, cu_k, None, max(lengths),
                                    problem.scale)
    expected, _ = problem.expected()
    assert_close_bf16(out, expected, "varlen_attention")
    # A row stride wider than the rows (K and V halves of one [total_k, 2, Hkv, D] tensor).
    packed = torch.stack([keys, values], dim=1)
    out = wideattn.varlen_attention(problem.q, packed[:, 0], packed[:, 1], problem.cu_seqlens_q, cu_k, None,
                                    max(lengths), problem.scale)
    assert_close_bf16(out, expected, "varlen_attention on strided rows")


def _params(problem, k_cache=None, v_cache=None, q=None, out=None, scales=(None, None, None), lse=None):
    k_cache = problem.k_cache if k_cache is None else k_cache
    v_cache = problem.v_cache if v_cache is None else v_cache
    q = problem.q if q is None else q
    out = torch.empty(q.shape, dtype=torch.bfloat16) if out is None else out
    layout = [0, k_cache.shape[0], k_cache.shape[1], k_cache.shape[2]]
    return ops.prefill_params(q, k_cache, v_cache, problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table,
                              layout + list(k_cache.stride()[:3]), layout + list(v_cache.stride()[:3]),
                              problem.scale, *scales, out, lse)


def test_parameters_pass_the_library_validation_and_select():
    context = wideattn.default_context()
    problem = Problem(MIXED, layout="vllm", seed=5)
    params = _params(problem)
    assert params.k_block_stride == problem.k_cache.stride(0) and params.k_slot_stride == problem.k_cache.stride(1)
    assert params.k_cache == problem.kv_cache.data_ptr() and params.v_cache == problem.kv_cache[1].data_ptr()
    assert params.block_table_stride == problem.block_table.shape[1] and params.num_seqs == len(MIXED)
    assert context.is_supported(params, SM90).name == "wgmma_bf16_d512"
    lse = torch.empty((problem.q_heads, problem.q.shape[0]))
    assert context.is_supported(_params(problem, lse=lse), SM90).name == "wgmma_bf16_d512"
    f64 = torch.empty(problem.q.shape, dtype=torch.float64)
    assert context.is_supported(_params(problem, out=f64), SM90).name == "reference_f64"
    # Token-row pages overlap, which TMA cannot describe: the cp.async kernel of the same dtypes.
    rows = attention.token_row_layout(problem.k_cache, problem.k_cache.stride(1), problem.k_cache.stride(2),
                                      problem.num_blocks * problem.block_size, problem.kv_heads)
    table = attention.token_row_block_table(problem.cu_seqlens_q[:-1], 40, problem.num_blocks * problem.block_size)
    params = ops.prefill_params(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q,
                                problem.seq_lens_k, table, rows, rows, problem.scale, None, None, None,
                                torch.empty(problem.q.shape, dtype=torch.bfloat16), None)
    assert context.is_supported(params, SM90).name == "mma_bf16_d512"


def test_e4m3_parameters_select_the_8bit_kernels():
    context = wideattn.default_context()
    problem = Problem(MIXED, seed=6)
    codes = problem.k_cache.view(torch.uint8)[..., :HEAD_DIM]
    scale = torch.ones(1)
    assert context.is_supported(_params(problem, codes, codes, scales=(None, scale, scale)), SM90).name == \
        "wgmma_e4m3kv_d512"
    q_codes = problem.q.view(torch.uint8)[..., :HEAD_DIM]
    assert context.is_supported(_params(problem, codes, codes, q=q_codes, scales=(scale, scale, scale)),
                                SM90).name == "wgmma_e4m3q_d512"


def test_library_errors_surface_with_their_message():
    problem = Problem([(4, 20)], seed=7)
    stride_zero = problem.q[:1].expand(4, -1, -1)
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_is_supported", "q_token_stride=0 must be >= 1"],
                          wideattn.prefill, stride_zero, problem.k_cache, problem.v_cache, problem.cu_seqlens_q,
                          problem.seq_lens_k, problem.block_table, 1.0)
    overlapping = torch.empty(16 * HEAD_DIM, dtype=torch.bfloat16).as_strided(problem.q.shape,
                                                                             (HEAD_DIM, HEAD_DIM // 2, 1))
    harness.expect_raises(wideattn.InvalidArgumentError, ["make output rows overlap"], run_prefill, problem,
                          out=overlapping)
    small = Problem([(4, 20)], kv_heads=1, seed=7)
    wide_group = small.q.repeat(1, 2, 1)                     # group 16: only the fp64 kernel serves it
    harness.expect_raises(wideattn.UnsupportedError, ["WIDEATTN_ERROR_UNSUPPORTED"], wideattn.prefill, wide_group,
                          small.k_cache, small.v_cache, small.cu_seqlens_q, small.seq_lens_k, small.block_table, 1.0)


def test_argument_checks_name_the_argument():
    p = Problem([(4, 20)], seed=8)
    args = [p.q, p.k_cache, p.v_cache, p.cu_seqlens_q, p.seq_lens_k, p.block_table, 1.0]
    e4m3 = p.k_cache.view(torch.uint8)[..., :HEAD_DIM]
    cases = [
        (0, p.q[0], ["q must be 3-D", "(16, 512)"]),
        (0, p.q.float(), ["q has dtype float32"]),
        (0, p.q.transpose(1, 2).contiguous().transpose(1, 2), ["q must be contiguous in its last dimension"]),
        (1, p.k_cache[..., :256], ["k_cache.shape[3] is 256 but q.shape[2] (head_dim) is 512"]),
        (2, p.v_cache.float(), ["v_cache has dtype float32"]),
        (2, e4m3, ["v_cache has dtype torch.uint8 but k_cache has torch.bfloat16"]),
        (1, p.k_cache[:, :, :1].repeat(1, 1, 3, 1), ["not a multiple of k_cache.shape[2]=3"]),
        (3, p.cu_seqlens_q.long(), ["cu_seqlens_q has dtype int64; expected int32"]),
        (3, p.cu_seqlens_q[:1], ["cu_seqlens_q has 1 entries"]),
        (3, p.cu_seqlens_q.to("meta"), ["cu_seqlens_q is on meta, the other tensors on cpu"]),
        (4, torch.zeros(2, dtype=torch.int32), ["seq_lens_k.shape[0] is 2 but cu_seqlens_q.shape[0] - 1 is 1"]),
        (5, p.block_table[0], ["block_table must be 2-D"]),
        (6, 0.0, ["softmax_scale=0.0 must be finite and > 0"]),
        (6, math.nan, ["softmax_scale=nan"]),
        (6, "1", ["softmax_scale must be a float, got str"]),
    ]
    for index, value, messages in cases:
        call = list(args)
        call[index] = value
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.prefill: "] + messages, wideattn.prefill,
                              *call)
    keyword_cases = [
        ({"out": torch.empty((3, 16, HEAD_DIM), dtype=torch.bfloat16)}, ["out has shape (3, 16, 512)"]),
        ({"out": torch.empty(p.q.shape)}, ["out has dtype float32; expected bfloat16, float64"]),
        ({"lse": torch.empty((16, 2))}, ["lse has shape (16, 2); expected [16, >= 4]"]),
        ({"lse": torch.empty((16, 4), dtype=torch.float64)}, ["lse has dtype float64; expected float32"]),
        ({"q_scale": torch.ones(1)}, ["q_scale is set but q is not e4m3"]),
        ({"k_scale": torch.ones(2)}, ["k_scale is set but the K cache is not e4m3"]),
        ({"max_seqlen_q": -1}, ["max_seqlen_q=-1 is outside 0 .."]),
        ({"max_seqlen_k": 2.5}, ["max_seqlen_k must be an int, got float"]),
        ({"max_seqlen_k": torch.tensor(20, device="meta")}, ["max_seqlen_k is a tensor on meta", "host int"]),
        ({"num_splits": 129}, ["num_splits=129 is outside 0 .. 128"]),
        ({"num_splits": -1}, ["num_splits=-1 is outside"]),
        ({"num_splits": 2.0}, ["num_splits must be an int, got float"]),
    ]
    for kwargs, messages in keyword_cases:
        harness.expect_raises(wideattn.InvalidArgumentError, messages, wideattn.prefill, *args, **kwargs)
    harness.expect_raises(wideattn.InvalidArgumentError, ["k_scale is None but the K cache is e4m3"],
                          wideattn.prefill, p.q, e4m3, e4m3, *args[3:])
    harness.expect_raises(wideattn.InvalidArgumentError, ["k_scale must hold one float32 element"],
                          wideattn.prefill, p.q, e4m3, e4m3, *args[3:], k_scale=torch.ones(2), v_scale=torch.ones(1))


WORKSPACE_ROUNDING = 256


def _round_up(size):
    return -(-size // WORKSPACE_ROUNDING) * WORKSPACE_ROUNDING


def _workspace_formula(splits, problem):
    """docs/design.md "Split-KV": S x total_q x num_q_heads fp32 rows of head_dim, then an fp32
    LSE per row, each region rounded up to 256 bytes."""
    rows = splits * problem.q.shape[0] * problem.q_heads
    return _round_up(rows * HEAD_DIM * 4) + _round_up(rows * 4)


def test_split_options_reach_the_library_and_keep_the_result():
    problem = Problem([(1, 700), (3, 40), (0, 9), (1, 1)], seed=13)
    expected, expected_lse = problem.expected()
    for splits in (None, 0, 1, 2, 7, 128):
        out, lse = run_prefill(problem, lse=True, max_seqlen_q=3, max_seqlen_k=700, num_splits=splits)
        assert_close_bf16(out, expected, f"num_splits={splits}")
        valid = torch.isfinite(expected_lse)
        assert torch.allclose(lse.double()[valid], expected_lse[valid], atol=1e-4), splits
    params = _params(problem)
    assert (params.max_seqlen_q, params.max_seqlen_k, params.num_splits, params.workspace) == (0, 0, 0, None)
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    params = ops.prefill_params(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                                problem.block_table, layout + list(problem.k_cache.stride()[:3]),
                                layout + list(problem.v_cache.stride()[:3]), problem.scale, None, None, None, out, None,
                                3, 700, 7)
    assert (params.max_seqlen_q, params.max_seqlen_k, params.num_splits) == (3, 700, 7)
    chosen = ops.validate_prefill(params)  # the first of the bundle's archs that serves it
    assert chosen.kind == "prefill" and chosen.q_dtype == "bf16" and chosen.kv_dtype == "bf16", chosen
    # With the workspace docs/design.md gives for 7 splits, the library plans exactly 7.
    workspace = ops.allocate_workspace(_workspace_formula(7, problem), torch.device("cpu"))
    plan = wideattn.default_context().plan_launch(ops.attach_workspace(params, workspace), SM90, SM90_SMS)
    assert plan.num_splits == 7 and plan.workspace_bytes == params.workspace_bytes, (plan, params.workspace_bytes)
    assert wideattn.default_context().kernels()[plan.merge_kernel_index].kind == "merge_splits", plan
    schema = str(torch.ops.wideattn.prefill.default._schema)
    assert "SymInt max_seqlen_q=0" in schema and "int num_splits=0" in schema, schema


def _broken(problem, array, index, value):
    """A copy of problem with one metadata entry replaced."""
    broken = copy.copy(problem)
    tensor = getattr(problem, array).clone()
    tensor[index] = value
    setattr(broken, array, tensor)
    return broken


def test_check_metadata_refuses_the_first_bad_entry_with_the_library_message():
    problem = Problem(MIXED, seed=15)   # cu_seqlens_q 0 7 8 12 29 29, 3-page rows, 14 blocks
    expected, _ = problem.expected()
    assert_close_bf16(run_prefill(problem, check_metadata=True), expected, "check_metadata=True")
    cases = [
        (("cu_seqlens_q", 2, 6),
         "cu_seqlens_q[2] = 6 is below cu_seqlens_q[1] = 7 (must be non-decreasing; checked mode)"),
        (("cu_seqlens_q", 0, 1), "cu_seqlens_q[0] = 1 is not 0 (the first sequence starts at query row 0; "
                                 "checked mode)"),
        (("cu_seqlens_q", 5, 30), "cu_seqlens_q[5] = 30 is above total_q = 29 (no sequence ends past the last "
                                  "query row; checked mode)"),
        (("seq_lens_k", 3, 16), "seq_lens_k[3] = 16 is below q_len = 17 of sequence 3 (cu_seqlens_q[4] - "
                                "cu_seqlens_q[3]; its keys include its new tokens; checked mode)"),
        (("seq_lens_k", 0, 49), "seq_lens_k[0] = 49 is above block_table_stride * block_size = 48 (the keys one "
                                "block_table row addresses; checked mode)"),
        (("block_table", (1, 2), -1), "block_table[1][2] = -1 (sequence 1, key block 2) is outside "
                                      "[0, num_blocks = 14) (checked mode)"),
        (("block_table", (3, 1), 14), "block_table[3][1] = 14 (sequence 3, key block 1) is outside "
                                      "[0, num_blocks = 14) (checked mode)"),
    ]
    for (array, index, value), message in cases:
        broken = _broken(problem, array, index, value)
        error = harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_prefill", message], run_prefill,
                                      broken, check_metadata=True)
        assert error.message == message, (error.message, message)
    # Only the used prefix of a row is read: sequence 4 (5 keys) uses one of its three entries.
    assert_close_bf16(run_prefill(_broken(problem, "block_table", (4, 2), -1), check_metadata=True), expected,
                      "an unused entry")
    harness.expect_raises(wideattn.InvalidArgumentError, ["check_metadata must be a bool, got int"], run_prefill,
                          problem, check_metadata=1)
    schema = str(torch.ops.wideattn.prefill.default._schema)
    assert "int flags=0" in schema, schema


def test_cpu_implementation_refuses_bad_metadata_without_checked_mode():
    """The reference cannot compute what the kernels would clamp: a block past the cache used to
    raise IndexError from the indexing, a negative one wrapped to the cache's end."""
    problem = Problem(MIXED, seed=17)   # 14 blocks, 3-page rows of 16 keys
    note = "the CPU implementation cannot read that key"
    cases = [(("block_table", (3, 1), 14), "block_table[3][1] = 14"),
             (("block_table", (0, 0), -1), "block_table[0][0] = -1"),
             (("seq_lens_k", 0, 49), "seq_lens_k[0] = 49 is above")]
    for (array, index, value), start in cases:
        error = harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_prefill", start, note], run_prefill,
                                      _broken(problem, array, index, value))
        assert error.message.startswith(start) and error.message.endswith(f"{note})"), error.message


def test_check_metadata_sets_the_flag_the_library_validates():
    problem = Problem([(3, 40), (1, 9)], seed=16)
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    arguments = (problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                 problem.block_table, layout + list(problem.k_cache.stride()[:3]),
                 layout + list(problem.v_cache.stride()[:3]), problem.scale, None, None, None, out, None, 0, 0, 0)
    params = ops.prefill_params(*arguments, _capi.FLAG_CHECK_METADATA)
    assert params.flags == 1 and ops.prefill_params(*arguments).flags == 0
    assert ops.validate_prefill(params).kind == "prefill"
    params.flags = 24
    harness.expect_raises(wideattn.InvalidArgumentError, ["flags=24 has unknown bits 0x18"], ops.validate_prefill,
                          params)
    # varlen_attention builds its rows' table; checked mode still reads the key counts.
    keys = problem.seq_lens_k
    cu_k = torch.tensor([0, int(keys[0]), int(keys[0]) + int(keys[1])], dtype=torch.int32)
    rows = torch.randn((int(cu_k[-1]), problem.kv_heads, HEAD_DIM)).bfloat16()
    wideattn.varlen_attention(problem.q, rows, rows, problem.cu_seqlens_q, cu_k, 3, 40, problem.scale,
                              check_metadata=True)
    harness.expect_raises(wideattn.InvalidArgumentError, ["seq_lens_k[0] = 40 is above block_table_stride * "
                                                          "block_size = 32"],
                          wideattn.varlen_attention, problem.q, rows, rows, problem.cu_seqlens_q, cu_k, 3, 20,
                          problem.scale, check_metadata=True)


class _RecordingContext:
    """Stands in for the library context in the CUDA implementation: records the workspace query
    and the launch (params as launched, the workspace tensor alive at launch time)."""

    WORKSPACE_BYTES = 4096

    def __init__(self):
        self.sized, self.launched = [], []

    def workspace_size(self, params):
        self.sized.append((params.max_seqlen_q, params.max_seqlen_k, params.num_splits, params.workspace))
        return self.WORKSPACE_BYTES

    def launch_prefill(self, params, stream):
        self.launched.append((params.workspace, params.workspace_bytes, params.num_splits, stream))


def test_cuda_implementation_sizes_and_attaches_the_workspace():
    # The one-shot CUDA path (capture, debug mode) with its launch seam replaced (no GPU here): it asks the library for the
    # workspace of these params, allocates it with torch.empty on the call's device, attaches it
    # and launches, reading no tensor data on the host.
    problem = Problem([(1, 300), (2, 41)], seed=14)
    recorder = _RecordingContext()
    allocated = []
    real_context, real_launch, real_allocate = ops.default_context, ops._launch, ops.allocate_workspace

    def allocate(size, device):
        tensor = real_allocate(size, torch.device("cpu"))
        allocated.append((size, device, tensor.data_ptr()))
        return tensor

    ops.default_context, ops._launch, ops.allocate_workspace = (lambda: recorder), \
        (lambda device, launch, params: launch(params, "stream")), allocate
    try:
        layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
        out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
        ops._prefill_once(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                          problem.block_table, layout + list(problem.k_cache.stride()[:3]),
                          layout + list(problem.v_cache.stride()[:3]), problem.scale, None, None, None, out, None,
                          2, 300, 33)
    finally:
        ops.default_context, ops._launch, ops.allocate_workspace = real_context, real_launch, real_allocate
    assert recorder.sized == [(2, 300, 33, None)], recorder.sized
    assert len(allocated) == 1 and allocated[0][0] == _RecordingContext.WORKSPACE_BYTES
    assert allocated[0][1] == problem.q.device
    assert recorder.launched == [(allocated[0][2], _RecordingContext.WORKSPACE_BYTES, 33, "stream")], recorder.launched
    assert ops.allocate_workspace(0, torch.device("cpu")) is None


class _RecordingPlan:
    """Stands in for a library plan: records its runs and whether it was closed."""

    def __init__(self, params):
        self.params, self.runs, self.closed, self.handle = params, [], False, 1

    def run(self, q, k_cache, v_cache, o, lse=None, stream=None):
        self.runs.append((q, k_cache, v_cache, o, lse, stream))

    def close(self):
        self.closed, self.handle = True, None


class _PlanningContext(_RecordingContext):
    """A _RecordingContext that also makes _RecordingPlans."""

    def __init__(self):
        super().__init__()
        self.plans = []

    def plan(self, params, caches=None):
        self.plans.append(_RecordingPlan((params.workspace, params.workspace_bytes, params.cu_seqlens_q)))
        return self.plans[-1]


def test_cuda_implementation_plans_once_per_signature_and_runs_per_layer():
    # The CUDA path's plan cache with its device seams replaced (no GPU here): the first call of a
    # signature sizes the workspace and makes a plan with it attached; the layers that follow (new
    # q, K/V and out tensors, the same metadata) run that plan with their own pointers; other
    # metadata makes another plan; the least recently used plan is closed beyond the cache's size;
    # debug mode launches one-shot.
    import contextlib
    problem = Problem([(1, 300), (2, 41)], seed=15)
    recorder = _PlanningContext()
    saved = (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans, ops._launch)
    ops.default_context = lambda: recorder
    ops._cuda_state = lambda device: (0, 0, False, 77)
    ops._on_device = lambda index: contextlib.nullcontext()
    ops.allocate_workspace = lambda size, device: torch.empty(size, dtype=torch.uint8)
    ops.plans = ops.PlanCache(entries=2)
    ops._launch = lambda device, launch, params: launch(params, "stream")
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    k_layout = layout + list(problem.k_cache.stride()[:3])
    v_layout = layout + list(problem.v_cache.stride()[:3])

    def call(cu_seqlens_q, k_cache, v_cache, q, out):
        ops._prefill_cuda(q, k_cache, v_cache, cu_seqlens_q, problem.seq_lens_k, problem.block_table, k_layout,
                          v_layout, problem.scale, None, None, None, out, None, 2, 300, 0)

    try:
        layers = [(problem.k_cache.clone(), problem.v_cache.clone(), problem.q.clone(),
                   torch.empty(problem.q.shape, dtype=torch.bfloat16)) for _ in range(3)]
        for k_cache, v_cache, q, out in layers:
            call(problem.cu_seqlens_q, k_cache, v_cache, q, out)
        assert len(recorder.plans) == 1 and len(recorder.sized) == 1
        plan = recorder.plans[0]
        assert plan.params[1] == _RecordingContext.WORKSPACE_BYTES and plan.params[0]
        assert plan.runs == [(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None, 77)
                             for k, v, q, o in layers], plan.runs
        # Other metadata (another cu_seqlens_q tensor): another plan; a third evicts the first.
        other = [problem.cu_seqlens_q.clone() for _ in range(2)]
        call(other[0], *layers[0])
        call(other[1], *layers[0])
        assert len(recorder.plans) == 3 and plan.closed and not recorder.plans[1].closed
        assert len(ops.plans) == 2 and ops.plans.hits == 2 and ops.plans.misses == 3
        # A plan closed with its context (wideattn.configure) is made again.
        recorder.plans[2].close()
        call(other[1], *layers[0])
        assert len(recorder.plans) == 4
        # Debug mode: a one-shot launch, no plan.
        previous = wideattn.set_debug(True)
        try:
            call(problem.cu_seqlens_q, *layers[0])
        finally:
            wideattn.set_debug(previous)
        assert len(recorder.plans) == 4 and len(recorder.launched) == 1
    finally:
        (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans,
         ops._launch) = saved


def test_plan_key_holds_what_the_plan_fixes_and_nothing_else():
    # The CUDA path's plan key (device seams replaced, no GPU here): the inline key is
    # ops.plan_key's; a call that changes only what each run passes (q, K/V bases, out, lse
    # pointers: the layers of a step) or the metadata's contents under the same pointers (the
    # kernels read them on the device at each run; the plan never reads them) runs the same plan;
    # a change of anything the plan fixes makes another.
    import contextlib
    problem = Problem([(1, 300), (2, 41)], seed=17)
    recorder = _PlanningContext()
    saved = (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans)
    ops.default_context = lambda: recorder
    ops._cuda_state = lambda tensor: (0, 0, False, 77)
    ops._on_device = lambda index: contextlib.nullcontext()
    ops.allocate_workspace = lambda size, device: torch.empty(size, dtype=torch.uint8)
    ops.plans = ops.PlanCache()
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    base = dict(q=problem.q, k=problem.k_cache, v=problem.v_cache, cu_seqlens_q=problem.cu_seqlens_q,
                seq_lens_k=problem.seq_lens_k, block_table=problem.block_table,
                k_layout=layout + list(problem.k_cache.stride()[:3]), v_layout=layout + list(problem.v_cache.stride()[:3]),
                softmax_scale=problem.scale, q_scale=None, k_scale=None, v_scale=None,
                out=torch.empty(problem.q.shape, dtype=torch.bfloat16), lse=None, max_seqlen_q=2, max_seqlen_k=300,
                num_splits=0, flags=0)

    def plans_after(**changes):
        args = dict(base, **changes)
        ops._prefill_cuda(*args.values())
        return len(recorder.plans)

    try:
        assert plans_after() == 1
        (key,) = ops.plans._plans
        assert key == ops.plan_key(0, 77, *[value for name, value in base.items() if name != "v"]), key
        lse = torch.empty((problem.q_heads, problem.q.shape[0]))
        same = {"q": problem.q.clone(), "k": problem.k_cache.clone(), "v": problem.v_cache.clone(),
                "out": torch.empty(problem.q.shape, dtype=torch.bfloat16),
                "k_layout": [5] + base["k_layout"][1:]}    # an offset moves the base pointer only
        for name, value in same.items():
            assert plans_after(**{name: value}) == 1, name
        problem.seq_lens_k.add_(0)                          # contents changed in place: same pointer
        problem.block_table[0, 0] = problem.block_table[0, 1]
        assert plans_after() == 1
        assert recorder.plans[0].runs[-1][2] == problem.v_cache.data_ptr()
        other = {"cu_seqlens_q": problem.cu_seqlens_q.clone(), "seq_lens_k": problem.seq_lens_k.clone(),
                 "block_table": problem.block_table.clone(), "softmax_scale": 0.5, "max_seqlen_q": 3,
                 "max_seqlen_k": 301, "num_splits": 2, "flags": 1, "lse": lse,
                 "out": torch.empty((problem.q.shape[0], problem.q.shape[1], 2 * HEAD_DIM),
                                    dtype=torch.bfloat16)[:, :, :HEAD_DIM],
                 "k_layout": base["k_layout"][:1] + [base["k_layout"][1] - 1] + base["k_layout"][2:],
                 "v_layout": base["v_layout"][:4] + [base["v_layout"][4] * 2] + base["v_layout"][5:],
                 "k_scale": torch.ones(1)}
        for count, (name, value) in enumerate(other.items(), start=2):
            assert plans_after(**{name: value}) == count, name
        # The run of a plan with an lse passes its pointer; an offset moves the K base by its elements.
        plans_after(lse=lse, k_layout=[3] + base["k_layout"][1:])
        run = recorder.plans[_plan_index("lse", other)].runs[-1]
        assert run[4] == lse.data_ptr() and run[1] == problem.k_cache.data_ptr() + 3 * 2, run
    finally:
        ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans = saved


def test_packed_op_is_the_same_call_and_runs_the_same_plan():
    # wideattn::prefill_packed: pack_config / unpack_config are inverses; its CUDA implementation
    # (device seams replaced, no GPU here) runs the plan a wideattn::prefill call of the same values
    # made, with the call's pointers; its fake implementation runs on meta tensors.
    import contextlib
    k_layout, v_layout = [3, 10, 16, 2, 4096, 1024, 512], [0, 10, 16, 2, 4096, 1024, 512]
    config = ops.pack_config(k_layout, v_layout, 2, 300, 1, 0)
    assert len(config) == ops.CONFIG_LEN and ops.unpack_config(config) == (k_layout, v_layout, 2, 300, 1, 0)
    problem = Problem([(1, 300), (2, 41)], seed=20)
    recorder = _PlanningContext()
    saved = (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans)
    ops.default_context = lambda: recorder
    ops._cuda_state = lambda tensor: (0, 0, False, 77)
    ops._on_device = lambda index: contextlib.nullcontext()
    ops.allocate_workspace = lambda size, device: torch.empty(size, dtype=torch.uint8)
    ops.plans = ops.PlanCache()
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    k_layout = layout + list(problem.k_cache.stride()[:3])
    v_layout = layout + list(problem.v_cache.stride()[:3])
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    metadata = (problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table)
    try:
        ops._prefill_cuda(problem.q, problem.k_cache, problem.v_cache, *metadata, k_layout, v_layout, problem.scale,
                          None, None, None, out, None, 2, 300, 0, 0)
        v_cache = problem.v_cache.clone()
        ops._packed_cuda(problem.q, problem.k_cache, v_cache, *metadata, out,
                         ops.pack_config(k_layout, v_layout, 2, 300, 0, 0), problem.scale)
        assert len(recorder.plans) == 1 and ops.plans.hits == 1, (len(recorder.plans), ops.plans.hits)
        assert recorder.plans[0].runs[-1][2] == v_cache.data_ptr(), recorder.plans[0].runs
    finally:
        ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans = saved
    meta = torch.device("meta")
    q = torch.empty((10, 16, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    k = torch.empty((4, 16, 2, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    cu, lens = torch.empty(2, dtype=torch.int32, device=meta), torch.empty(1, dtype=torch.int32, device=meta)
    table = torch.empty((1, 4), dtype=torch.int32, device=meta)
    ops._prefill_packed_op(q, k, k, cu, lens, table, torch.empty_like(q),
                           ops.pack_config(k_layout, k_layout, 10, 64, 0, 0), 1.0)


def test_packed_cuda_handle_returns_the_plan_that_ran_and_its_run_function():
    # The C++ op's slow path (wideattn.cpp_ops; device seams replaced, no GPU here): it runs the call
    # as wideattn::prefill_packed's CUDA implementation does and returns the cached plan's handle
    # with the address of the wideattn_plan_run the plan calls; the next call of the same key runs
    # the same plan; a one-shot call (debug mode) returns None.
    import contextlib
    import ctypes
    run_function = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
    problem = Problem([(1, 300), (2, 41)], seed=21)
    recorder = _PlanningContext()
    plan_of = recorder.plan

    def plan_with_run(params, caches=None):
        made = plan_of(params, caches)
        made.handle = 4242
        made.run_address = lambda: ctypes.cast(run_function, ctypes.c_void_p).value
        return made
    recorder.plan = plan_with_run
    saved = (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans, ops._launch)
    ops.default_context = lambda: recorder
    ops._cuda_state = lambda tensor: (0, 0, False, 77)
    ops._on_device = lambda index: contextlib.nullcontext()
    ops.allocate_workspace = lambda size, device: torch.empty(size, dtype=torch.uint8)
    ops.plans = ops.PlanCache()
    ops._launch = lambda device, launch, params: launch(params, "stream")
    layout = [0, problem.k_cache.shape[0], problem.k_cache.shape[1], problem.k_cache.shape[2]]
    config = ops.pack_config(layout + list(problem.k_cache.stride()[:3]), layout + list(problem.v_cache.stride()[:3]),
                             2, 300, 0, 0)
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    args = (problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
            problem.block_table, out, config, problem.scale)
    try:
        expected = (4242, ctypes.cast(run_function, ctypes.c_void_p).value)
        assert ops._packed_cuda_handle(*args) == expected
        assert ops._packed_cuda_handle(*args) == expected
        assert len(recorder.plans) == 1 and len(recorder.plans[0].runs) == 2, recorder.plans
        previous = wideattn.set_debug(True)
        try:
            assert ops._packed_cuda_handle(*args) is None
        finally:
            wideattn.set_debug(previous)
        assert len(recorder.launched) == 1 and len(recorder.plans[0].runs) == 2
    finally:
        (ops.default_context, ops._cuda_state, ops._on_device, ops.allocate_workspace, ops.plans,
         ops._launch) = saved


def test_cpp_ops_need_cuda_and_leave_the_python_op_in_place_without_it():
    # wideattn.cpp_ops without a CUDA device (this machine): load() refuses with a message naming the
    # reason, load_or_warn() warns and leaves the Python op as the entry points' op, stats() refuses;
    # the source ships beside the module, its layout and config lengths are the package's.
    import os
    import re
    import warnings
    from wideattn import cpp_ops
    assert os.path.isfile(cpp_ops.SOURCE), cpp_ops.SOURCE
    source = open(cpp_ops.SOURCE).read()
    assert int(re.search(r"kLayoutLen = (\d+);", source).group(1)) == ops.LAYOUT_LEN
    assert "kConfigLen = 2 * kLayoutLen + 4;" in source and ops.CONFIG_LEN == 2 * ops.LAYOUT_LEN + 4
    if torch.cuda.is_available():
        return
    before = ops._prefill_packed_op
    harness.expect_raises(RuntimeError, ["wideattn.cpp_ops.load", "no CUDA device"], cpp_ops.load)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpp_ops.load_or_warn()
    assert any("the C++ op was not loaded" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert ops._prefill_packed_op is before and not cpp_ops.loaded()
    harness.expect_raises(RuntimeError, ["not loaded"], cpp_ops.stats)
    # $WIDEATTN_CPP_OPS, read when wideattn.ops is imported: 1 without CUDA warns and keeps the
    # Python op; any value but 1, 0 or empty fails the import naming the variable.
    import subprocess
    import sys
    probe = "import wideattn.ops as o; print(o._prefill_packed_op)"
    for value, code, needle in (
            ("1", 0, "the C++ op was not loaded"),
            ("2", 1, "$WIDEATTN_CPP_OPS='2': use 1 (build and load the C++ op wideattn_cpp::prefill_packed) "
                     "or 0 / unset (off)")):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env=dict(os.environ, **{ops.ENV_CPP_OPS: value}))
        assert done.returncode == code and needle in done.stderr, (value, done.returncode, done.stderr[-400:])
        if code == 0:
            assert "wideattn.prefill_packed" in done.stdout, done.stdout


def test_eager_calls_without_lse_and_scales_run_the_packed_op():
    # After the checked call of its signature (wideattn::prefill), an eager call without lse and
    # scales runs wideattn::prefill_packed with the values the checks derived; a call with lse or
    # scales, and every call under torch.compile (ops._is_compiling), runs wideattn::prefill.
    # Either gives the reference's result.
    problem = Problem(MIXED, seed=21)
    expected, expected_lse = problem.expected()
    ran = []
    full, packed, compiling = ops._prefill_op, ops._prefill_packed_op, ops._is_compiling

    def recording(name, op):
        def call(*args):
            ran.append(name)
            return op(*args)
        return call

    ops._prefill_op, ops._prefill_packed_op = recording("prefill", full), recording("packed", packed)
    try:
        attention._checked_prefill.clear()
        for _ in range(3):
            assert_close_bf16(run_prefill(problem, max_seqlen_k=40), expected, "prefill")
        assert ran == ["prefill", "packed", "packed"], ran
        del ran[:]
        for _ in range(2):
            out, lse = run_prefill(problem, lse=True)
            assert_close_bf16(out, expected, "prefill with lse")
        assert ran == ["prefill", "prefill"], ran
        del ran[:]
        ops._is_compiling = lambda: True
        assert_close_bf16(run_prefill(problem, max_seqlen_k=40), expected, "prefill under compile")
        assert ran == ["prefill"], ran
    finally:
        ops._prefill_op, ops._prefill_packed_op, ops._is_compiling = full, packed, compiling


def _plan_index(name, changes):
    """The index in _PlanningContext.plans of the plan made for changes[name] (one plan before them)."""
    return 1 + list(changes).index(name)


def test_prefill_signature_memo_keeps_only_plain_scalars_and_their_types():
    # The public function's memo of checked signatures: a tensor hint (read by the checks) is
    # checked at every call; a bool where an int passed before is checked, and refused; lse=True
    # and an lse tensor are signatures of their own.
    problem = Problem([(1, 40)], seed=18)
    calls, checks = [], []
    real_checker = _checks.Checker
    patch = PrefillOps(lambda *args: calls.append(args)).__enter__()

    class CountingChecker(real_checker):
        def __init__(self, call):
            checks.append(call)
            super().__init__(call)

    _checks.Checker = CountingChecker

    def call(**kwargs):
        return wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                                problem.block_table, problem.scale, **kwargs)

    try:
        attention._checked_prefill.clear()
        for _ in range(3):
            call(max_seqlen_q=torch.tensor(1))
        assert len(checks) == 3 and calls[-1][-4] == 1, (len(checks), calls[-1][-4:])
        call(num_splits=1)
        call(num_splits=1)
        assert len(checks) == 4
        harness.expect_raises(wideattn.InvalidArgumentError, ["num_splits must be an int, got bool"], call,
                              num_splits=True)
        harness.expect_raises(wideattn.InvalidArgumentError, ["check_metadata must be a bool, got int"], call,
                              check_metadata=0)
        out, lse = call(lse=True)
        again = call(lse=True)
        assert isinstance(again, tuple) and again[1].shape == lse.shape and again[1] is not lse
        assert call(lse=False) is not None and not isinstance(call(lse=False), tuple)
        given = torch.empty((problem.q_heads, problem.q.shape[0] + 2))
        assert call(lse=given)[1] is given and call(lse=given)[1] is given
        # Fast-path calls pass the op what the checked call of their signature passed it.
        assert calls[-1][-5] is given and [a for a in calls[-1] if not isinstance(a, torch.Tensor)] == \
            [a for a in calls[-2] if not isinstance(a, torch.Tensor)]
    finally:
        patch.__exit__()
        _checks.Checker = real_checker


def test_prefill_checks_each_argument_signature_once_and_every_call_in_debug_mode():
    # The public function: a call whose argument signature passed the checks goes straight to the
    # op; a new signature (another shape) and debug mode run the checks again.
    problem = Problem([(1, 40)], seed=16)
    calls = []
    patch = PrefillOps(lambda *args: calls.append(args)).__enter__()
    checks = []
    real_checker = _checks.Checker

    class CountingChecker(real_checker):
        def __init__(self, call):
            checks.append(call)
            super().__init__(call)

    _checks.Checker = CountingChecker
    try:
        attention._checked_prefill.clear()
        for _ in range(3):
            wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                             problem.block_table, problem.scale)
        assert len(calls) == 3 and len(checks) == 1
        # The fast path passes the op what the checked path passes it.
        assert [a for a in calls[0] if not isinstance(a, torch.Tensor)] == \
            [a for a in calls[2] if not isinstance(a, torch.Tensor)]
        wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                         problem.block_table, problem.scale, out=torch.empty(problem.q.shape, dtype=torch.bfloat16))
        assert len(checks) == 2
        previous = wideattn.set_debug(True)
        try:
            wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                             problem.block_table, problem.scale)
        finally:
            wideattn.set_debug(previous)
        assert len(checks) == 3
        # A bad argument is still refused after its good signature was seen.
        try:
            wideattn.prefill(problem.q, problem.k_cache, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                             problem.block_table, float("nan"))
        except wideattn.InvalidArgumentError as error:
            assert "softmax_scale=nan" in str(error), error
        else:
            raise AssertionError("a NaN softmax_scale was accepted")
    finally:
        patch.__exit__()
        _checks.Checker = real_checker


def test_e4m3_codec():
    known = [(0.0, 0x00), (-0.0, 0x80), (1.0, 0x38), (-1.0, 0xB8), (448.0, 0x7E), (500.0, 0x7E), (-1e30, 0xFE),
             (2.0 ** -9, 0x01), (2.0 ** -10, 0x00), (3 * 2.0 ** -10, 0x02), (1.0625, 0x38), (1.1875, 0x3A),
             (math.inf, 0x7F), (-math.inf, 0xFF), (math.nan, 0x7F)]
    codes, nonfinite = reference.e4m3_encode(torch.tensor([value for value, _ in known]))
    assert codes.tolist() == [code for _, code in known], [hex(c) for c in codes.tolist()]
    assert nonfinite == 3
    finite = torch.tensor([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=torch.uint8)
    again, _ = reference.e4m3_encode(reference.e4m3_decode(finite))
    assert torch.equal(again, finite)
    assert reference.e4m3_decode(torch.tensor([0x7E, 0x08, 0x01], dtype=torch.uint8)).tolist() == \
        [448.0, 2.0 ** -6, 2.0 ** -9]


def _source(tokens, seed):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn((tokens, 2, HEAD_DIM), generator=generator) * 3).bfloat16()


def test_power_of_two_scale_rounds_up_exactly():
    """wideattn.power_of_two_scale: each scale to the smallest power of two >= it (a power of two
    stays, 2^-126 included; up to 2^119, a larger scale stays as it is), a new tensor; a scale
    that is not float32 is refused."""
    above32 = 2.0 ** 119 * (1.0 + 2.0 ** -23)   # the float32 just above 2^119
    scales = torch.tensor([1.0, 0.75, 3.0e-3, 2.0 ** -126, 448.0 / 448.0, 0.5000001, 1.0e30, 2.0 ** 119 * 0.75,
                           above32, 7.5e35], dtype=torch.float32)
    expected = torch.tensor([1.0, 1.0, 2.0 ** -8, 2.0 ** -126, 1.0, 1.0, 2.0 ** 100, 2.0 ** 119, above32, 7.5e35],
                            dtype=torch.float32)
    rounded = wideattn.power_of_two_scale(scales)
    assert torch.equal(rounded, expected), rounded
    assert rounded.data_ptr() != scales.data_ptr() and scales[1].item() == 0.75
    for value in (1.0e-20, 0.3, 7.0, 1234.5):
        one = torch.tensor([value], dtype=torch.float32)
        r = wideattn.power_of_two_scale(one).item()
        assert r >= value and r / 2 < value and math.frexp(r)[0] == 0.5, (value, r)
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.power_of_two_scale", "scale"],
                          wideattn.power_of_two_scale, scales.double())


def test_compute_scale_skips_padding_and_counts_nonfinite():
    src = _source(6, 9)
    src[1, 0, 5] = float("nan")
    src[2, 1, 7] = float("inf")
    src[4, 0, 0] = 1000.0                       # padding token: left out of the amax
    slots = torch.tensor([3, 0, 7, 9, -1, 2])
    counter = torch.zeros(1, dtype=torch.int32)
    scale = wideattn.compute_scale(src, slots, nonfinite_count=counter)
    kept = src[slots >= 0].float()
    amax = kept[torch.isfinite(kept)].abs().max()
    assert scale.dtype == torch.float32 and scale.shape == (1,)
    assert scale.item() == max((amax / 448.0).item(), 2.0 ** -126)
    assert counter.item() == 2
    assert wideattn.compute_scale(torch.zeros((3, 2, HEAD_DIM), dtype=torch.bfloat16)).item() == 2.0 ** -126
    harness.expect_raises(wideattn.InvalidArgumentError, ["slot_mapping.shape[0] is 5 but src.shape[0] (tokens) is 6"],
                          wideattn.compute_scale, src, slots[:5])
    harness.expect_raises(wideattn.InvalidArgumentError, ["src has dtype float32"], wideattn.compute_scale,
                          src.float())


def test_compute_scale_rounds_to_a_power_of_two_in_its_call():
    """compute_scale(..., power_of_two=True): power_of_two_scale of the plain scale (padding and
    non-finite values left out as there), up to the largest power-of-two scale: bf16's largest
    values give amax / 448 > 2^119, which stays; a power_of_two that is not a bool is refused by
    name, and the op's schema defaults it to False (calls from before keep their meaning)."""
    src = _source(6, 12)
    src[1, 0, 5] = float("nan")
    src[4, 0, 0] = 1000.0
    slots = torch.tensor([3, 0, 7, 9, -1, 2])
    for mapping in (None, slots):
        counter = torch.zeros(1, dtype=torch.int32)
        rounded = wideattn.compute_scale(src, mapping, nonfinite_count=counter, power_of_two=True)
        plain = wideattn.compute_scale(src, mapping)
        assert torch.equal(rounded, wideattn.power_of_two_scale(plain)), (rounded, plain)
        assert math.frexp(rounded.item())[0] == 0.5 and counter.item() == 1
    huge = torch.full((2, 2, HEAD_DIM), 3.0e38).bfloat16()
    plain = wideattn.compute_scale(huge)
    assert plain.item() > reference.MAX_POWER_OF_TWO_SCALE
    assert torch.equal(wideattn.compute_scale(huge, power_of_two=True), plain)
    out = torch.zeros(1, dtype=torch.float32)
    assert wideattn.compute_scale(torch.zeros((3, 2, HEAD_DIM), dtype=torch.bfloat16), out=out,
                                  power_of_two=True) is out and out.item() == 2.0 ** -126
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.compute_scale", "power_of_two=1"],
                          wideattn.compute_scale, src, power_of_two=1)
    assert "bool power_of_two=False" in str(torch.ops.wideattn.compute_scale.default._schema)


def test_quantize_to_cache_writes_the_mapped_slots():
    problem = Problem([(4, 20)], layout="vllm", seed=10)
    cache = torch.full((2, problem.num_blocks, 16, 2, HEAD_DIM), 0xAA, dtype=torch.uint8)
    src = _source(5, 11)
    slots = torch.tensor([37, 2, -1, 16, 63])
    scale = wideattn.compute_scale(src)
    wideattn.quantize_to_cache(src, cache[1], slots, scale)
    codes, _ = reference.quantize(src, scale)
    flat = cache[1].reshape(-1, 2, HEAD_DIM)
    for token, slot in enumerate(slots.tolist()):
        if slot >= 0:
            assert torch.equal(flat[slot], codes[token]), slot
    written = set(s for s in slots.tolist() if s >= 0)
    untouched = [s for s in range(flat.shape[0]) if s not in written]
    assert (flat[untouched] == 0xAA).all() and (cache[0] == 0xAA).all()
    harness.expect_raises(wideattn.InvalidArgumentError, ["cache has dtype bfloat16"], wideattn.quantize_to_cache,
                          src, problem.k_cache, slots, scale)
    harness.expect_raises(wideattn.InvalidArgumentError, ["slot_mapping has dtype int32; expected int64"],
                          wideattn.quantize_to_cache, src, cache[1], slots.int(), scale)


def test_quantize_flat_and_e4m3_attention():
    problem = Problem([(6, 37), (1, 18)], seed=12)
    k_scale, v_scale = wideattn.compute_scale(problem.k_cache.reshape(-1, 2, HEAD_DIM)), \
        wideattn.compute_scale(problem.v_cache.reshape(-1, 2, HEAD_DIM))
    k_codes = wideattn.quantize(problem.k_cache.reshape(-1, 2, HEAD_DIM), k_scale).reshape(problem.k_cache.shape)
    v_codes = wideattn.quantize(problem.v_cache.reshape(-1, 2, HEAD_DIM), v_scale).reshape(problem.v_cache.shape)
    expected_codes, _ = reference.quantize(problem.k_cache.reshape(-1, 2, HEAD_DIM), k_scale)
    assert torch.equal(reference.e4m3_codes(k_codes).reshape(-1, 2, HEAD_DIM), expected_codes)
    out = wideattn.prefill(problem.q, k_codes, v_codes, problem.cu_seqlens_q, problem.seq_lens_k,
                           problem.block_table, problem.scale, k_scale=k_scale, v_scale=v_scale)
    k_deq = reference.e4m3_decode(k_codes) * k_scale.double()
    v_deq = reference.e4m3_decode(v_codes) * v_scale.double()
    expected, _ = problem.expected(k_deq, v_deq)
    assert_close_bf16(out, expected, "e4m3 K/V attention")



def _transposed_problem(seed):
    """A varlen e4m3 problem (K/V codes and scales) with its V also in the transposed layout."""
    problem = Problem([(6, 37), (1, 18), (3, 33)], seed=seed)
    heads = problem.kv_heads
    k_scale = wideattn.compute_scale(problem.k_cache.reshape(-1, heads, HEAD_DIM))
    v_scale = wideattn.compute_scale(problem.v_cache.reshape(-1, heads, HEAD_DIM))
    k_codes = wideattn.quantize(problem.k_cache.reshape(-1, heads, HEAD_DIM), k_scale).reshape(problem.k_cache.shape)
    v_codes = wideattn.quantize(problem.v_cache.reshape(-1, heads, HEAD_DIM), v_scale).reshape(problem.v_cache.shape)
    return problem, k_codes, v_codes, reference.transposed_v_cache(v_codes), k_scale, v_scale


def test_v_slot_position_is_the_headers_permutation():
    # include/wideattn.h: position(s) = 16 (s / 16) + 4 ((s / 2) % 4) + 2 ((s / 8) % 2) + s % 2.
    page = [reference.v_slot_position(s) for s in range(64)]
    assert page == [16 * (s // 16) + 4 * ((s // 2) % 4) + 2 * ((s // 8) % 2) + s % 2 for s in range(64)], page
    assert sorted(page[:16]) == list(range(16)) and page[16:32] == [16 + p for p in page[:16]], page
    tensor = reference.v_slot_position(torch.arange(64))
    assert tensor.tolist() == page


def test_transposed_v_cache_moves_every_code_to_its_place():
    problem, _, v_codes, v_t, _, _ = _transposed_problem(seed=21)
    codes, moved = reference.e4m3_codes(v_codes), reference.e4m3_codes(v_t)
    assert tuple(v_t.shape) == (problem.num_blocks, problem.kv_heads, HEAD_DIM, problem.block_size)
    assert v_t.is_contiguous() and v_t.dtype == v_codes.dtype
    for block, slot, head, dim in [(0, 0, 0, 0), (1, 5, 1, 511), (2, 15, 0, 7), (problem.num_blocks - 1, 9, 1, 300)]:
        assert moved[block, head, dim, reference.v_slot_position(slot)] == codes[block, slot, head, dim]
    try:
        reference.transposed_v_cache(torch.zeros((2, 24, 1, 8), dtype=torch.uint8))
    except ValueError as error:
        assert "cache.shape[1]=24 (block_size) is not a multiple of 16" in str(error), error
    else:
        raise AssertionError("block_size 24 was accepted")


def test_quantize_to_cache_writes_the_transposed_v_layout():
    problem, _, v_codes, v_t, _, v_scale = _transposed_problem(seed=22)
    heads = problem.kv_heads
    tokens = problem.num_blocks * problem.block_size
    src = problem.v_cache.reshape(tokens, heads, HEAD_DIM)
    # Every slot through a shuffled slot mapping with padding (-1) mixed in.
    slots = torch.randperm(tokens, generator=torch.Generator().manual_seed(5))
    mapping = torch.cat([slots, torch.tensor([-1, -1])])
    src_mapped = torch.cat([src[slots], src[:2]])
    engine = torch.zeros_like(v_codes)
    wideattn.quantize_to_cache(src_mapped, engine, mapping, v_scale)
    transposed = torch.zeros_like(v_t)
    wideattn.quantize_to_cache(src_mapped, transposed, mapping, v_scale, v_transposed=True)
    assert torch.equal(reference.e4m3_codes(transposed), reference.e4m3_codes(reference.transposed_v_cache(engine)))
    assert torch.equal(reference.e4m3_codes(engine), reference.e4m3_codes(v_codes))


def test_quantize_to_cache_refuses_a_bad_transposed_cache():
    problem, _, v_codes, v_t, _, v_scale = _transposed_problem(seed=23)
    src = problem.v_cache.reshape(-1, problem.kv_heads, HEAD_DIM)[:4]
    mapping = torch.arange(4)
    cases = [
        (v_codes, "cache.shape[1] is 16 but src.shape[1] (heads) is 2"),   # the engine layout given as transposed
        (torch.zeros((3, problem.kv_heads, HEAD_DIM, 24), dtype=v_t.dtype),
         "cache.shape[3]=24 (block_size) must be a multiple of 16"),
        (torch.zeros((3, problem.kv_heads, HEAD_DIM, 32), dtype=v_t.dtype)[..., :16], "each page row contiguous"),
        (v_t.transpose(2, 3).contiguous().transpose(2, 3), "contiguous in its last dimension"),
        (torch.zeros((3, problem.kv_heads + 1, HEAD_DIM, 16), dtype=v_t.dtype), "cache.shape[1]"),
        (torch.zeros((3, problem.kv_heads, HEAD_DIM // 2, 16), dtype=v_t.dtype),
         f"cache.shape[2] is {HEAD_DIM // 2} but src.shape[2] (head_dim) is {HEAD_DIM}"),
    ]
    for cache, text in cases:
        try:
            wideattn.quantize_to_cache(src, cache, mapping, v_scale, v_transposed=True)
        except Exception as error:
            assert "wideattn.quantize_to_cache" in str(error) and text in str(error), (text, str(error))
        else:
            raise AssertionError(f"accepted: {text}")
    try:
        wideattn.quantize_to_cache(src, v_t, mapping, v_scale, v_transposed=1)
    except Exception as error:
        assert "v_transposed must be a bool, got int" in str(error), error
    else:
        raise AssertionError("v_transposed=1 was accepted")


def test_quantize_op_refuses_a_cache_layout_of_another_length():
    problem, _, _, v_t, _, v_scale = _transposed_problem(seed=26)
    src = problem.v_cache.reshape(-1, problem.kv_heads, HEAD_DIM)[:2]
    for layout in ([v_t.shape[0], 16, v_t.stride(0), 1], [v_t.shape[0], 16, v_t.stride(0), 1, v_t.stride(1), 2, 0]):
        try:
            ops._quantize_op(src, v_t, torch.arange(2), v_scale, layout, None)
        except Exception as error:
            assert (f"cache_layout has {len(layout)} entries; expected 5 or 6 (with flags)" in str(error)
                    and "wideattn_quantize_to_cache" in str(error)), str(error)
        else:
            raise AssertionError(f"a cache_layout of {len(layout)} entries was accepted")


def test_prefill_reads_a_transposed_v_cache():
    if not any("v_transposed" in k.features for k in wideattn.kernels()):
        print("    (skipped: no kernel of the bundle reads the transposed V layout)")
        return
    problem, k_codes, v_codes, v_t, k_scale, v_scale = _transposed_problem(seed=24)
    args = (problem.q, k_codes)
    meta = (problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table, problem.scale)
    engine = wideattn.prefill(*args, v_codes, *meta, k_scale=k_scale, v_scale=v_scale)
    for _ in range(2):   # the first call checks the signature, the second takes the memo
        transposed, lse = wideattn.prefill(*args, v_t, *meta, k_scale=k_scale, v_scale=v_scale, lse=True,
                                           v_transposed=True)
        assert torch.equal(transposed, engine), (transposed.float() - engine.float()).abs().max()
    k_deq = reference.e4m3_decode(k_codes) * k_scale.double()
    v_deq = reference.e4m3_decode(v_codes) * v_scale.double()
    expected, expected_lse = problem.expected(k_deq, v_deq)
    assert_close_bf16(transposed, expected, "e4m3 K + transposed V attention")
    assert torch.allclose(lse.double(), expected_lse, atol=1e-4), (lse.double() - expected_lse).abs().max()


def test_prefill_with_transposed_v_selects_an_fp8_pv_kernel_and_checks_its_arguments():
    problem, k_codes, v_codes, v_t, k_scale, v_scale = _transposed_problem(seed=25)
    meta = (problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table, problem.scale)
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    k_layout = [0, k_codes.shape[0], k_codes.shape[1], k_codes.shape[2]] + list(k_codes.stride()[:3])
    v_layout = [0, v_t.shape[0], v_t.shape[3], v_t.shape[1], v_t.stride(0), 1, v_t.stride(1)]
    params = ops.prefill_params(problem.q, k_codes, v_t, problem.cu_seqlens_q, problem.seq_lens_k,
                                problem.block_table, k_layout, v_layout, problem.scale, None, k_scale, v_scale, out,
                                None, flags=_capi.FLAG_V_TRANSPOSED)
    kernels = {k.name: k for k in wideattn.library.default_context().kernels()}
    if any("v_transposed" in k.features for k in kernels.values()):
        info = ops.validate_prefill(params)
        assert "v_transposed" in kernels[info.name].features, info.name
    cases = [
        (dict(v_cache=v_codes), "the transposed V cache of k_cache"),   # the engine layout given as transposed
        (dict(k_cache=problem.k_cache), "k_cache has dtype bfloat16"),
        (dict(v_cache=v_t[:, :1].contiguous()), "v_cache has shape"),
        (dict(v_transposed="yes"), "v_transposed must be a bool, got str"),
        (dict(k_cache=torch.zeros((problem.num_blocks, 16, 3, HEAD_DIM), dtype=k_codes.dtype),
              v_cache=torch.zeros((problem.num_blocks, 3, HEAD_DIM, 16), dtype=v_t.dtype)),
         f"q.shape[1]={problem.q_heads} (num_q_heads) is not a multiple of k_cache.shape[2]=3 (num_kv_heads)"),
    ]
    if hasattr(torch, "float8_e4m3fn") and v_t.dtype != torch.uint8:
        cases.append((dict(v_cache=v_t.view(torch.uint8)), "v_cache has dtype torch.uint8"))
    for change, text in cases:
        call = dict(k_cache=k_codes, v_cache=v_t, v_transposed=True)
        call.update(change)
        try:
            wideattn.prefill(problem.q, call["k_cache"], call["v_cache"], *meta, k_scale=k_scale, v_scale=v_scale,
                             v_transposed=call["v_transposed"])
        except Exception as error:
            assert "wideattn.prefill" in str(error) and text in str(error), (text, str(error))
        else:
            raise AssertionError(f"accepted: {text}")


# K from V (wideattn.prefill_k_from_v): Gemma 4's global-layer description over the tests' caches.
GEMMA4_ROTARY_DIMS = 128
GEMMA4_THETA = 1.0e6
KFV_DECODE = [(1, 300), (1, 41), (1, 1)]


def _k_norm_weights(seed):
    """k_norm weights that are bf16 values, as a checkpoint's, in float32 [HEAD_DIM]."""
    generator = torch.Generator().manual_seed(seed)
    return (1.0 + 0.25 * torch.randn(HEAD_DIM, generator=generator)).bfloat16().float()


def _rope_keys(values, positions, weights, frequencies):
    """K of Gemma 4's global layers from float values [L, H, D] written as transformers writes it:
    x = bf16(V w), cos / sin of the full width (the frequencies twice) in bf16, and
    x * cos + rotate_half(x) * sin in bf16 tensor arithmetic (rotate_half(x) = cat(-x2, x1))."""
    x = (values.float() * weights).bfloat16()
    angle = positions.float()[:, None] * frequencies[None, :]
    cos = torch.cat((angle, angle), dim=-1).cos().bfloat16()[:, None, :]
    sin = torch.cat((angle, angle), dim=-1).sin().bfloat16()[:, None, :]
    half = HEAD_DIM // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _rebuilt_k_cache(problem, weights, frequencies, v_dequant=None):
    """A K cache holding, at every slot a sequence's key j uses, K rebuilt (_rope_keys) from its V
    at position j (the tests' block tables give each sequence pages of its own)."""
    k_cache = torch.zeros(problem.v_cache.shape, dtype=torch.bfloat16)
    for s, (_, length) in enumerate(problem.seqs):
        keys = _rope_keys(problem.values(s, v_dequant), torch.arange(length), weights, frequencies)
        for j in range(length):
            k_cache[int(problem.block_table[s, j // problem.block_size]), j % problem.block_size] = keys[j]
    return k_cache


def _run_k_from_v(problem, weights, **kwargs):
    kwargs.setdefault("rope_theta", GEMMA4_THETA)
    return wideattn.prefill_k_from_v(problem.q, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                                     problem.block_table, problem.scale, weights, GEMMA4_ROTARY_DIMS, **kwargs)


def test_k_from_v_keys_are_transformers_rope_of_the_scaled_values():
    # reference.k_from_v_keys (first and second half of the dims) against the full-width rotate_half
    # form, bit for bit, at small positions and near 131072 (angles up to 1.3e5 rad); the
    # frequencies of the theta formula against the float64 power, and the dims from
    # rotary_dims / 2 on passing x through unrotated.
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    assert frequencies.dtype == torch.float32 and frequencies.shape == (HEAD_DIM // 2,)
    expected = [1.0 / float(torch.tensor(GEMMA4_THETA ** (float(torch.tensor(2 * i / HEAD_DIM, dtype=torch.float32))),
                                         dtype=torch.float32)) for i in (0, 1, 63)]
    assert [float(frequencies[i]) for i in (0, 1, 63)] == [float(torch.tensor(e, dtype=torch.float32)) for e in expected]
    assert not frequencies[GEMMA4_ROTARY_DIMS // 2:].any()
    weights = _k_norm_weights(3)
    values = torch.randn((64, 2, HEAD_DIM), generator=torch.Generator().manual_seed(4)).bfloat16().double()
    for first in (0, 131008):
        positions = torch.arange(first, first + values.shape[0])
        keys = reference.k_from_v_keys(values, positions, weights, frequencies)
        assert torch.equal(keys, _rope_keys(values, positions, weights, frequencies)), first
        x = (values.float() * weights).bfloat16()
        unrotated = list(range(GEMMA4_ROTARY_DIMS // 2, HEAD_DIM // 2)) + \
            list(range(HEAD_DIM // 2 + GEMMA4_ROTARY_DIMS // 2, HEAD_DIM))
        assert torch.equal(keys[..., unrotated], x[..., unrotated]), first
        if first == 0:
            assert torch.equal(keys[0], x[0])   # position 0: cos 1, sin 0 for every frequency
    table = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, None, frequencies[:GEMMA4_ROTARY_DIMS // 2] * 2)
    assert torch.equal(table[:GEMMA4_ROTARY_DIMS // 2], 2 * frequencies[:GEMMA4_ROTARY_DIMS // 2])


def test_prefill_k_from_v_matches_attention_over_the_rebuilt_keys():
    # Single-token decode over a shuffled V-only cache (what decode_bf16kfv_d512 serves; the CPU
    # implementation validates the call with the library and runs the reference): the output and
    # LSE of naive attention over a K cache rebuilt independently (_rebuilt_k_cache); the same with
    # the frequencies passed as a table and with a float64 out (the fp64 kernel's call).
    problem = Problem(KFV_DECODE, seed=21)
    weights = _k_norm_weights(5)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    expected, expected_lse = problem.expected(k_dequant=_rebuilt_k_cache(problem, weights, frequencies))
    out, lse = _run_k_from_v(problem, weights, lse=True)
    assert_close_bf16(out, expected, "prefill_k_from_v")
    assert torch.allclose(lse.double(), expected_lse, rtol=1e-5, atol=1e-5), (lse - expected_lse).abs().max()
    table = frequencies[:GEMMA4_ROTARY_DIMS // 2].clone()
    assert torch.equal(_run_k_from_v(problem, weights, rope_theta=None, inv_freq=table), out)
    exact = _run_k_from_v(problem, weights, out=torch.empty(problem.q.shape, dtype=torch.float64))
    assert (exact - expected).abs().max().item() < 1e-9


def test_prefill_k_from_v_over_an_e4m3_v_cache():
    # e4m3 codes with v_scale: K rebuilt from the dequantised values (code x scale in float32).
    problem = Problem(KFV_DECODE, seed=22)
    scale = torch.tensor([0.0125], dtype=torch.float32)
    codes, _ = reference.quantize(problem.v_cache, scale)
    problem.v_cache = codes
    v_dequant = (reference.e4m3_decode(codes, torch.float64) * scale.double()).float()
    weights = _k_norm_weights(6)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    expected, _ = problem.expected(k_dequant=_rebuilt_k_cache(problem, weights, frequencies, v_dequant),
                                   v_dequant=v_dequant)
    assert_close_bf16(_run_k_from_v(problem, weights, v_scale=scale), expected, "prefill_k_from_v (e4m3 V)")


def test_prefill_k_from_v_checks_name_the_argument():
    problem = Problem(KFV_DECODE, seed=23)
    weights = _k_norm_weights(7)
    base = dict(q=problem.q, v_cache=problem.v_cache, k_norm_scale=weights, rotary_dims=GEMMA4_ROTARY_DIMS,
                rope_theta=GEMMA4_THETA)
    cases = [
        (dict(q=problem.q.float()), "q has dtype float32; expected bfloat16"),
        (dict(v_cache=problem.v_cache[..., :256]), "v_cache.shape[3] is 256 but q.shape[2] (head_dim) is 512"),
        (dict(v_cache=problem.v_cache[:, :, :1].repeat(1, 1, 3, 1)), "not a multiple of v_cache.shape[2]=3"),
        (dict(k_norm_scale=weights.double()), "k_norm_scale has dtype float64; expected float32"),
        (dict(k_norm_scale=weights[:256]), "k_norm_scale.shape[0] is 256 but q.shape[2] (head_dim) is 512"),
        (dict(k_norm_scale=None), "k_norm_scale is None"),
        (dict(rotary_dims=127), "rotary_dims=127 must be even"),
        (dict(rotary_dims=514), "rotary_dims=514 is outside 0 .. 512"),
        (dict(rotary_dims=128.0), "rotary_dims must be an int, got float"),
        (dict(rope_theta=None), "rope_theta must be a float when inv_freq is None, got NoneType"),
        (dict(rope_theta=0.0), "rope_theta=0.0 must be finite and > 0"),
        (dict(rope_theta=math.inf), "rope_theta=inf must be finite and > 0"),
        (dict(inv_freq=torch.ones(63)), "inv_freq.shape[0] is 63 but rotary_dims / 2 is 64"),
        (dict(inv_freq=torch.ones(64, dtype=torch.float64)), "inv_freq has dtype float64; expected float32"),
        (dict(v_scale=torch.ones(1)), "v_scale is set but the V cache is not e4m3 (pass None)"),
        (dict(v_cache=reference.quantize(problem.v_cache, torch.ones(1))[0]),
         "v_scale is None but the V cache is e4m3 and needs its per-tensor scale"),
    ]
    for change, text in cases:
        call = dict(base)
        call.update(change)
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.prefill_k_from_v: ", text],
                              wideattn.prefill_k_from_v, call.pop("q"), call.pop("v_cache"), problem.cu_seqlens_q,
                              problem.seq_lens_k, problem.block_table, problem.scale, call.pop("k_norm_scale"),
                              call.pop("rotary_dims"), **call)
    # The K-from-V op itself (one wideattn_prefill with the flag) over several query tokens of one
    # sequence with a bf16 out: the library's refusal, naming the kernels that rebuild K
    # (prefill_k_from_v serves such calls through the rebuild instead: the tests below).
    prompt = Problem([(4, 20)], seed=24)
    layout = [0, prompt.num_blocks, prompt.block_size, prompt.kv_heads] + list(prompt.v_cache.stride()[:3])
    harness.expect_raises(wideattn.UnsupportedError, ["decode_bf16kfv_d512", "one query token per sequence"],
                          ops._k_from_v_op, prompt.q, prompt.v_cache, prompt.cu_seqlens_q, prompt.seq_lens_k,
                          prompt.block_table, layout, prompt.scale, None, weights, None, GEMMA4_THETA,
                          GEMMA4_ROTARY_DIMS, torch.empty(prompt.q.shape, dtype=torch.bfloat16), None)


def test_prefill_k_from_v_hands_the_library_the_flag_and_the_description():
    # The CUDA implementation with its launch seam replaced (no GPU here): k_cache NULL with its
    # strides 0, WIDEATTN_FLAG_K_FROM_V and the check flag, and the wideattn_k_from_v of the call
    # (this C API's size, the weight and table pointers, theta, rotary_dims, the cos / sin table and
    # its rows) alive at launch time.
    problem = Problem(KFV_DECODE, seed=25)
    weights = _k_norm_weights(8)
    table = torch.ones(GEMMA4_ROTARY_DIMS // 2)
    cos_sin_table = torch.zeros((37, GEMMA4_ROTARY_DIMS // 2, 2), dtype=torch.bfloat16)
    launched = []

    class Recorder(_RecordingContext):
        def launch_prefill(self, params, stream):
            d = params.k_from_v.contents
            launched.append((params.k_cache, params.k_block_stride, params.k_slot_stride, params.k_head_stride,
                             params.v_cache, params.flags, params.k_scale, d.struct_size, d.rope_type, d.pairing,
                             d.k_norm_scale, d.rope_theta, d.rotary_dims, d.inv_freq, d.cos_sin,
                             d.cos_sin_positions, d.reserved2))

    real_context, real_launch = ops.default_context, ops._launch
    ops.default_context, ops._launch = (lambda: Recorder()), (lambda device, launch, params: launch(params, "stream"))
    try:
        layout = [0, problem.num_blocks, problem.block_size, problem.kv_heads] + list(problem.v_cache.stride()[:3])
        for inv_freq, theta, cos_sin in ((None, GEMMA4_THETA, None), (table, 0.0, None),
                                         (None, GEMMA4_THETA, cos_sin_table)):
            ops._k_from_v_cuda(problem.q, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                               problem.block_table, layout, problem.scale, None, weights, inv_freq, theta,
                               GEMMA4_ROTARY_DIMS, torch.empty(problem.q.shape, dtype=torch.bfloat16), None,
                               flags=_capi.FLAG_CHECK_METADATA, cos_sin=cos_sin)
    finally:
        ops.default_context, ops._launch = real_context, real_launch
    flags = _capi.FLAG_K_FROM_V | _capi.FLAG_CHECK_METADATA
    common = (None, 0, 0, 0, problem.v_cache.data_ptr(), flags, None, ctypes.sizeof(_capi.KFromV),
              _capi.ROPE_PROPORTIONAL, _capi.ROPE_ROTATE_HALF, weights.data_ptr())
    assert ctypes.sizeof(_capi.KFromV) == 56
    assert launched == [common + (GEMMA4_THETA, GEMMA4_ROTARY_DIMS, None, None, 0, 0),
                        common + (0.0, GEMMA4_ROTARY_DIMS, table.data_ptr(), None, 0, 0),
                        common + (GEMMA4_THETA, GEMMA4_ROTARY_DIMS, None, cos_sin_table.data_ptr(), 37, 0)], launched


def _k_from_v_meta_inputs(tokens):
    """A K-from-V call's inputs on the meta device: q of `tokens` tokens, a V-only cache of 4 pages
    of 16 over 2 KV heads, two sequences of up to 4 pages, k_norm weights."""
    meta = torch.device("meta")
    q = torch.empty((tokens, 16, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    v = torch.empty((4, 16, 2, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    cu = torch.empty(3, dtype=torch.int32, device=meta)
    lens = torch.empty(2, dtype=torch.int32, device=meta)
    table = torch.empty((2, 4), dtype=torch.int32, device=meta)
    weights = torch.empty(HEAD_DIM, dtype=torch.float32, device=meta)
    return meta, q, v, cu, lens, table, weights


def test_prefill_k_from_v_fake_implementation_runs_on_meta_tensors():
    meta, q, v, cu, lens, table, weights = _k_from_v_meta_inputs(2)
    out = wideattn.prefill_k_from_v(q, v, cu, lens, table, 1.0, weights, GEMMA4_ROTARY_DIMS, rope_theta=GEMMA4_THETA)
    assert out.device == meta and tuple(out.shape) == (2, 16, HEAD_DIM) and out.dtype == torch.bfloat16
    schema = str(torch.ops.wideattn.prefill_k_from_v.default._schema)
    assert "Tensor(a!) out" in schema and "Tensor? cos_sin=None" in schema, schema
    cos_sin = torch.empty((64, GEMMA4_ROTARY_DIMS // 2, 2), dtype=torch.bfloat16, device=meta)
    out = wideattn.prefill_k_from_v(q, v, cu, lens, table, 1.0, weights, GEMMA4_ROTARY_DIMS, rope_theta=GEMMA4_THETA,
                                    cos_sin=cos_sin)
    assert out.device == meta and tuple(out.shape) == (2, 16, HEAD_DIM)


# The cos / sin table (wideattn_k_from_v.cos_sin, C API 0.7.0): wideattn.k_from_v_cos_sin and
# prefill_k_from_v(..., cos_sin=...).
OTHER_THETA = 1.0e4     # a table of this theta gives keys far from Gemma 4's own


def _torch_cos_sin(frequencies, rows):
    """A cos / sin table [rows, len(frequencies), 2] of torch's float32 cos / sin rounded to bf16 (what
    _rope_keys and the CPU reference evaluate), for tables whose keys the tests rebuild themselves."""
    angle = torch.arange(rows, dtype=torch.float32)[:, None] * frequencies[None, :]
    return torch.stack((angle.cos(), angle.sin()), dim=-1).bfloat16()


def test_k_from_v_cos_sin_holds_the_decode_kernels_cos_and_sin():
    # Every entry of the library's table is cos / sin of fp32(j * f[i]) rounded to bf16 as the
    # kernels round it: torch's values but at rare rounding ties (one bf16 ulp then); position 0 is
    # (1, 0); a caller's inv_freq equal to the formula's gives the same table; device moves it.
    table = wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 300, rope_theta=GEMMA4_THETA)
    assert table.dtype == torch.bfloat16 and tuple(table.shape) == (300, GEMMA4_ROTARY_DIMS // 2, 2)
    assert table.device.type == "cpu"
    assert torch.equal(table[0, :, 0], torch.ones(GEMMA4_ROTARY_DIMS // 2, dtype=torch.bfloat16))
    assert torch.equal(table[0, :, 1], torch.zeros(GEMMA4_ROTARY_DIMS // 2, dtype=torch.bfloat16))
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)[:GEMMA4_ROTARY_DIMS // 2]
    expected = _torch_cos_sin(frequencies, 300)
    ulps = (table.view(torch.int16).int() - expected.view(torch.int16).int()).abs()
    assert ulps.max().item() <= 1, ulps.max()
    assert (ulps > 0).sum().item() <= table.numel() // 100, (ulps > 0).sum()
    assert torch.equal(wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 300, inv_freq=frequencies.clone()), table)
    assert torch.equal(wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 300, rope_theta=GEMMA4_THETA, device="cpu"),
                       table)
    # The same entries whatever the table's length; another head_dim moves the frequencies.
    assert torch.equal(wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 5, rope_theta=GEMMA4_THETA), table[:5])
    assert not torch.equal(wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 5, rope_theta=GEMMA4_THETA, head_dim=256),
                           table[:5])


def test_k_from_v_cos_sin_checks_name_the_argument():
    cases = [
        (dict(rotary_dims=126), "rotary_dims=126 must be a multiple of 4"),
        (dict(rotary_dims=0), "rotary_dims=0 is outside 4 .. 512"),
        (dict(rotary_dims=516), "rotary_dims=516 is outside 4 .. 512"),
        (dict(rotary_dims=128.0), "rotary_dims must be an int, got float"),
        (dict(positions=0), "positions=0 is outside 1 .. 2147483647"),
        (dict(head_dim=511), "head_dim=511 must be even"),
        (dict(rope_theta=None), "rope_theta must be a float when inv_freq is None, got NoneType"),
        (dict(rope_theta=-1.0), "rope_theta=-1.0 must be finite and > 0"),
        (dict(rope_theta=math.nan), "rope_theta=nan must be finite and > 0"),
        (dict(inv_freq=torch.ones(63)), "inv_freq.shape[0] is 63 but rotary_dims / 2 is 64"),
        (dict(inv_freq=torch.ones(64, dtype=torch.float64)), "inv_freq has dtype float64; expected float32"),
    ]
    for change, text in cases:
        call = dict(rotary_dims=GEMMA4_ROTARY_DIMS, positions=4, rope_theta=GEMMA4_THETA)
        call.update(change)
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.k_from_v_cos_sin: ", text],
                              wideattn.k_from_v_cos_sin, **call)


def _rebuilt_k_cache_with_table(problem, weights, frequencies, table_frequencies, rows):
    """_rebuilt_k_cache with the keys below position `rows` rebuilt with table_frequencies instead
    (what a cos / sin table of those frequencies over `rows` positions gives)."""
    k_cache = _rebuilt_k_cache(problem, weights, frequencies)
    held = _rebuilt_k_cache(problem, weights, table_frequencies)
    for s, (_, length) in enumerate(problem.seqs):
        for j in range(min(length, rows)):
            slot = (int(problem.block_table[s, j // problem.block_size]), j % problem.block_size)
            k_cache[slot] = held[slot]
    return k_cache


def test_prefill_k_from_v_with_a_cos_sin_table_of_another_theta():
    # The CPU implementation honours the table: a table of another theta over 37 positions (the
    # decode batch's keys reach 301, 42 and 2) gives that theta's keys below position 37 and Gemma 4's
    # after; a table over every key gives the other theta's outputs bit for bit; the library's own
    # table of Gemma 4's theta, the outputs without a table (torch's cos / sin round like the
    # kernels' but at rare ties).
    problem = Problem(KFV_DECODE, seed=26)
    weights = _k_norm_weights(9)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    others = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, OTHER_THETA)
    rows = 37
    table = _torch_cos_sin(others[:GEMMA4_ROTARY_DIMS // 2], rows)
    expected, expected_lse = problem.expected(
        k_dequant=_rebuilt_k_cache_with_table(problem, weights, frequencies, others, rows))
    out, lse = _run_k_from_v(problem, weights, cos_sin=table, lse=True)
    assert_close_bf16(out, expected, "prefill_k_from_v (a cos / sin table of 37 rows)")
    assert torch.allclose(lse.double(), expected_lse, rtol=1e-5, atol=1e-5), (lse - expected_lse).abs().max()
    without = _run_k_from_v(problem, weights)
    assert not torch.equal(out, without)
    full = _torch_cos_sin(others[:GEMMA4_ROTARY_DIMS // 2], 301)
    assert torch.equal(_run_k_from_v(problem, weights, cos_sin=full), _run_k_from_v(problem, weights,
                                                                                   rope_theta=OTHER_THETA))
    exact = _run_k_from_v(problem, weights, cos_sin=table, out=torch.empty(problem.q.shape, dtype=torch.float64))
    assert (exact - expected).abs().max().item() < 1e-9
    filled = wideattn.k_from_v_cos_sin(GEMMA4_ROTARY_DIMS, 301, rope_theta=GEMMA4_THETA)
    assert_close_bf16(_run_k_from_v(problem, weights, cos_sin=filled), without, "the library's own table")
    # reference.k_from_v_keys reads the table only below its rows.
    values = torch.randn((50, 2, HEAD_DIM), generator=torch.Generator().manual_seed(27)).bfloat16().double()
    positions = torch.arange(50)
    keys = reference.k_from_v_keys(values, positions, weights, frequencies, table)
    assert torch.equal(keys[:rows], reference.k_from_v_keys(values, positions, weights, others)[:rows])
    assert torch.equal(keys[rows:], reference.k_from_v_keys(values, positions, weights, frequencies)[rows:])


def test_prefill_k_from_v_cos_sin_checks_name_the_argument():
    problem = Problem(KFV_DECODE, seed=28)
    weights = _k_norm_weights(10)
    rows, half = 37, GEMMA4_ROTARY_DIMS // 2
    table = torch.zeros((rows, half, 2), dtype=torch.bfloat16)
    misaligned = torch.zeros(rows * half * 2 + 1, dtype=torch.bfloat16)[1:].view(rows, half, 2)
    cases = [
        (dict(cos_sin=table.float()), "cos_sin has dtype float32; expected bfloat16"),
        (dict(cos_sin=table[0]), "cos_sin must be 3-D [positions, rotary_dims // 2, 2] of bfloat16"),
        (dict(cos_sin=table[:, :63]), "cos_sin.shape[1] is 63 but rotary_dims / 2 is 64"),
        (dict(cos_sin=torch.zeros((rows, half, 3), dtype=torch.bfloat16)), "cos_sin.shape[2] is 3 but (cos, sin) is 2"),
        (dict(cos_sin=table[:0]), "cos_sin.shape[0]=0 (positions) is outside 1 .. 2147483647"),
        (dict(cos_sin=torch.zeros((rows, 2 * half, 2), dtype=torch.bfloat16)[:, ::2]), "cos_sin must be contiguous"),
        (dict(cos_sin=misaligned), "is not 8-byte aligned"),
        (dict(cos_sin=torch.zeros((rows, 63, 2), dtype=torch.bfloat16), rotary_dims=126),
         "rotary_dims=126 must be a positive multiple of 4 with a cos_sin table"),
        (dict(cos_sin=table, rope_theta=None), "rope_theta must be a float when inv_freq is None"),
    ]
    for change, text in cases:
        call = dict(rotary_dims=GEMMA4_ROTARY_DIMS, rope_theta=GEMMA4_THETA)
        call.update(change)
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.prefill_k_from_v: ", text],
                              wideattn.prefill_k_from_v, problem.q, problem.v_cache, problem.cu_seqlens_q,
                              problem.seq_lens_k, problem.block_table, problem.scale, weights,
                              call.pop("rotary_dims"), **call)


# Several query tokens over a V-only cache (C API 0.8.0): wideattn.k_from_v_rebuild
# (wideattn_k_from_v_rebuild: the keys rebuilt into a bf16 K + V cache) and prefill_k_from_v's
# path through it (the rebuild into a scratch, then the K + V prefill op).
KFV_SEVERAL = [(5, 40), (1, 33), (17, 17), (0, 5), (3, 3)]   # chunk with context, decode, prompt, idle, prompt


def _rebuild(problem, weights, k_out, v_out, out_table, **kwargs):
    kwargs.setdefault("rope_theta", GEMMA4_THETA)
    return wideattn.k_from_v_rebuild(problem.q, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                                     problem.block_table, weights, GEMMA4_ROTARY_DIMS, k_out, v_out, out_table,
                                     **kwargs)


def _expected_rebuild(problem, weights, out_table, shape, fill, values_of=None, src_zero=(), keys_of=None):
    """The caches k_from_v_rebuild writes, computed key by key: `fill` everywhere, then for each
    sequence s and key j < its length (`keys_of(s)`, default seq_lens_k) at page out_table[s][j //
    block_size] (when inside the caches) K rebuilt as transformers writes it (_rope_keys) from V
    (`values_of(s)`: float values [L, H, D]; default the bf16 cache's) and V as bf16; the (s, j) in
    src_zero read zeros (a source page outside the cache)."""
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    k_cache = torch.full(shape, fill, dtype=torch.bfloat16)
    v_cache = torch.full(shape, fill, dtype=torch.bfloat16)
    for s, (_, length) in enumerate(problem.seqs):
        length = length if keys_of is None else keys_of(s)
        values = (problem.values(s) if values_of is None else values_of(s))[:length].clone()
        for j in range(length):
            if (s, j) in src_zero:
                values[j] = 0.0
        keys = _rope_keys(values, torch.arange(length), weights, frequencies)
        for j in range(length):
            page = int(out_table[s, j // problem.block_size])
            if 0 <= page < shape[0]:
                k_cache[page, j % problem.block_size] = keys[j]
                v_cache[page, j % problem.block_size] = values[j].bfloat16()
    return k_cache, v_cache


def _out_table(problem, width, pages, seed):
    """A shuffled int32 out table [num_seqs, width] of distinct pages below `pages`."""
    order = torch.randperm(pages, generator=torch.Generator().manual_seed(seed))[:len(problem.seqs) * width]
    return order.to(torch.int32).view(len(problem.seqs), width).clone()


def test_k_from_v_rebuild_writes_k_and_v_at_the_out_pages():
    # bf16 and e4m3 V caches into shuffled out pages (more pages than used, a sentinel elsewhere):
    # K rebuilt from each key's V (transformers' form of the formula, bit for bit), V as bf16 (e4m3:
    # bf16 of code x scale in float32), nothing else written; out returned as given or allocated.
    problem = Problem(KFV_SEVERAL, seed=30)
    weights = _k_norm_weights(11)
    width = problem.block_table.shape[1]
    shape = (len(KFV_SEVERAL) * width + 4, problem.block_size, problem.kv_heads, HEAD_DIM)
    table = _out_table(problem, width, shape[0], 31)
    k_out, v_out = torch.full(shape, -7.0, dtype=torch.bfloat16), torch.full(shape, -7.0, dtype=torch.bfloat16)
    out = _rebuild(problem, weights, k_out, v_out, table)
    assert tuple(out.shape) == tuple(problem.q.shape) and out.dtype == torch.bfloat16
    expected_k, expected_v = _expected_rebuild(problem, weights, table, shape, -7.0)
    assert torch.equal(k_out, expected_k) and torch.equal(v_out, expected_v)
    given = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    assert _rebuild(problem, weights, k_out, v_out, table, out=given, max_seqlen_q=17, max_seqlen_k=40) is given
    assert torch.equal(k_out, expected_k)
    scale = torch.tensor([0.0125], dtype=torch.float32)
    codes, _ = reference.quantize(problem.v_cache, scale)
    dequantised = (reference.e4m3_decode(codes, torch.float64) * scale.double()).float()
    bf16_values = problem.v_cache
    problem.v_cache = codes
    k_out.fill_(3.0)
    v_out.fill_(3.0)
    _rebuild(problem, weights, k_out, v_out, table, v_scale=scale)
    expected_k, expected_v = _expected_rebuild(problem, weights, table, shape, 3.0,
                                               values_of=lambda s: problem.values(s, dequantised).float())
    assert torch.equal(k_out, expected_k) and torch.equal(v_out, expected_v)
    problem.v_cache = bf16_values


def test_k_from_v_rebuild_reads_the_metadata_as_the_kernel_does():
    # Without checked mode: a source page outside the V cache reads as zeros, an out page outside
    # k_out is skipped, a sequence's keys past the out table's row are not rebuilt; checked mode
    # refuses such entries with the library's messages ("out: " for the out table's).
    problem = Problem([(3, 40), (1, 33)], seed=32)
    weights = _k_norm_weights(12)
    shape = (8, problem.block_size, problem.kv_heads, HEAD_DIM)
    table = torch.tensor([[0, 5, 2], [7, 99, 3]], dtype=torch.int32)   # sequence 1's page 1: outside
    block_table = problem.block_table.clone()
    block_table[0, 2] = problem.num_blocks + 5                          # sequence 0's keys 32 .. 39
    saved, problem.block_table = problem.block_table, block_table
    k_out, v_out = torch.full(shape, 5.0, dtype=torch.bfloat16), torch.full(shape, 5.0, dtype=torch.bfloat16)
    _rebuild(problem, weights, k_out, v_out, table)
    problem.block_table = saved
    expected_k, expected_v = _expected_rebuild(problem, weights, table, shape, 5.0,
                                               src_zero={(0, j) for j in range(32, 40)})
    assert torch.equal(k_out, expected_k) and torch.equal(v_out, expected_v)
    narrow = table[:, :1].contiguous()                                  # one page a row: 16 keys each
    k_out.fill_(5.0)
    v_out.fill_(5.0)
    _rebuild(problem, weights, k_out, v_out, narrow)
    expected_k, expected_v = _expected_rebuild(problem, weights, narrow, shape, 5.0, keys_of=lambda s: 16)
    assert torch.equal(k_out, expected_k) and torch.equal(v_out, expected_v)
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_k_from_v_rebuild", "out: block_table[1][1] = 99 "
                          "(sequence 1, key block 1) is outside [0, num_blocks = 8) (checked mode)"],
                          _rebuild, problem, weights, k_out, v_out, table, check_metadata=True)
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn_k_from_v_rebuild", "out: seq_lens_k[0] = 40 is "
                          "above block_table_stride * block_size = 16"],
                          _rebuild, problem, weights, k_out, v_out, narrow, check_metadata=True)
    problem.block_table = block_table
    error = harness.expect_raises(wideattn.InvalidArgumentError, [f"block_table[0][2] = {problem.num_blocks + 5} "],
                                  _rebuild, problem, weights, k_out, v_out, table, check_metadata=True)
    assert "out: " not in str(error), str(error)
    problem.block_table = saved


def test_k_from_v_rebuild_checks_name_the_argument():
    problem = Problem(KFV_SEVERAL, seed=33)
    weights = _k_norm_weights(13)
    shape = (20, problem.block_size, problem.kv_heads, HEAD_DIM)
    cache = torch.zeros(shape, dtype=torch.bfloat16)
    table = _out_table(problem, 3, 20, 34)
    wide_rows = torch.zeros(shape[:3] + (HEAD_DIM + 4,), dtype=torch.bfloat16)[..., :HEAD_DIM]
    misaligned = torch.zeros(cache.numel() + 1, dtype=torch.bfloat16)[1:].view(shape)
    base = dict(k_out=cache, v_out=cache.clone(), out_table=table, rope_theta=GEMMA4_THETA)
    cases = [
        (dict(k_out=None), "k_out is None; expected a tensor"),
        (dict(k_out=cache.float()), "k_out has dtype float32; expected bfloat16"),
        (dict(v_out=cache[0]), "v_out must be 4-D"),
        (dict(k_out=torch.zeros((20, 32, problem.kv_heads, HEAD_DIM), dtype=torch.bfloat16)),
         "k_out.shape[1] is 32 but v_cache.shape[1] (block_size) is 16"),
        (dict(v_out=torch.zeros((20, 16, 3, HEAD_DIM), dtype=torch.bfloat16)),
         "v_out.shape[2] is 3 but v_cache.shape[2] (num_kv_heads) is 2"),
        (dict(k_out=cache[..., :256]), "k_out.shape[3] is 256 but v_cache.shape[3] (head_dim) is 512"),
        (dict(v_out=cache[:5]), "v_out has shape (5, 16, 2, 512) but k_out has (20, 16, 2, 512)"),
        (dict(k_out=cache[:0], v_out=cache[:0]), "k_out.shape[0] (num_blocks) is 0"),
        (dict(k_out=wide_rows), "k_out has strides (16512, 1032, 516, 1): the first three must be positive "
                                "multiples of 8"),
        (dict(v_out=misaligned), "is not 16-byte aligned"),
        (dict(out_table=table.long()), "out_block_table has dtype int64; expected int32"),
        (dict(out_table=table[:3]), "out_block_table.shape[0] is 3 but num_seqs is 5"),
        (dict(out_table=table[:, :0]), "out_block_table has no column"),
        (dict(rope_theta=None), "rope_theta must be a float when inv_freq is None, got NoneType"),
        (dict(v_scale=torch.ones(1)), "v_scale is set but the V cache is not e4m3 (pass None)"),
        (dict(out=torch.empty((3, 16, HEAD_DIM), dtype=torch.bfloat16)), "out has shape (3, 16, 512)"),
        (dict(max_seqlen_k=-1), "max_seqlen_k=-1 is outside 0 .. "),
        (dict(check_metadata=1), "check_metadata must be a bool, got int"),
    ]
    for change, text in cases:
        call = dict(base)
        call.update(change)
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.k_from_v_rebuild: ", text], _rebuild,
                              problem, weights, call.pop("k_out"), call.pop("v_out"), call.pop("out_table"), **call)
    q, problem.q = problem.q, problem.q.float()
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.k_from_v_rebuild: ", "q has dtype float32"],
                          _rebuild,
                          problem, weights, cache, cache.clone(), table, rope_theta=GEMMA4_THETA)
    problem.q = q


class _OpLog:
    """Records the ops prefill_k_from_v runs (name, arguments) and runs them."""

    NAMES = ("_k_from_v_op", "_k_from_v_rebuild_op", "_prefill_op")

    def __enter__(self):
        self.calls, self.saved = [], {name: getattr(ops, name) for name in self.NAMES}
        for name, function in self.saved.items():
            setattr(ops, name, self._recording(name, function))
        return self

    def _recording(self, name, function):
        def call(*args):
            self.calls.append((name, args))
            return function(*args)
        return call

    def __exit__(self, *exc):
        for name, function in self.saved.items():
            setattr(ops, name, function)

    def names(self):
        return [name for name, _ in self.calls]


def test_prefill_k_from_v_serves_several_query_tokens_over_the_rebuilt_keys():
    # A varlen batch with prompts and a chunk over a shuffled V-only cache, bf16 and e4m3: the
    # rebuild into a scratch of num_seqs x ceil(max key / block_size) pages with the identity table,
    # then the K + V prefill over it with the call's metadata, scale, out and lse; the output and
    # LSE of naive attention over K rebuilt independently (_rebuilt_k_cache).
    problem = Problem(KFV_SEVERAL, seed=35)
    weights = _k_norm_weights(14)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    expected, expected_lse = problem.expected(k_dequant=_rebuilt_k_cache(problem, weights, frequencies))
    num_seqs, pages = len(KFV_SEVERAL), 3
    with _OpLog() as log:
        out, lse = _run_k_from_v(problem, weights, lse=True)
    assert log.names() == ["_k_from_v_rebuild_op", "_prefill_op"], log.names()
    rebuild, prefill = log.calls[0][1], log.calls[1][1]
    k_scratch, v_scratch, table = rebuild[12], rebuild[13], rebuild[14]
    assert tuple(k_scratch.shape) == (num_seqs * pages, problem.block_size, problem.kv_heads, HEAD_DIM)
    assert k_scratch.dtype == v_scratch.dtype == torch.bfloat16 and table.dtype == torch.int32
    assert torch.equal(table, torch.arange(num_seqs * pages, dtype=torch.int32).view(num_seqs, pages))
    assert prefill[1] is k_scratch and prefill[2] is v_scratch and prefill[5] is table
    assert prefill[3] is problem.cu_seqlens_q and prefill[4] is problem.seq_lens_k and prefill[8] == problem.scale
    assert prefill[12] is out and prefill[13] is lse and rebuild[11] is out
    assert_close_bf16(out, expected, "prefill_k_from_v, several query tokens")
    assert torch.allclose(lse.double(), expected_lse, rtol=1e-5, atol=1e-5), (lse - expected_lse).abs().max()
    # The page count from the max_seqlen_k hint (capped at the block table's width); with the hints,
    # the same output.
    for hint, expected_pages in ((40, 3), (33, 3), (1000, 3)):
        with _OpLog() as log:
            hinted = _run_k_from_v(problem, weights, max_seqlen_q=17, max_seqlen_k=hint)
        assert log.calls[0][1][12].shape[0] == num_seqs * expected_pages, (hint, log.calls[0][1][12].shape)
        assert log.calls[1][1][14:16] == (17, hint), log.calls[1][1][14:16]
        assert torch.equal(hinted, out), hint
    # A max_seqlen_k below a sequence's keys: its scratch row cannot hold them (the CPU prefill
    # refuses them; the kernels would read them clamped).
    harness.expect_raises(wideattn.InvalidArgumentError, ["seq_lens_k[0] = 40 is above block_table_stride * "
                                                          "block_size = 32"],
                          _run_k_from_v, problem, weights, max_seqlen_k=20)
    # e4m3 V: K rebuilt from code x scale, V read as bf16 of it.
    scale = torch.tensor([0.0125], dtype=torch.float32)
    codes, _ = reference.quantize(problem.v_cache, scale)
    v_dequant = (reference.e4m3_decode(codes, torch.float64) * scale.double()).float()
    e4m3_expected, _ = problem.expected(k_dequant=_rebuilt_k_cache(problem, weights, frequencies, v_dequant),
                                        v_dequant=v_dequant)
    problem.v_cache = codes
    with _OpLog() as log:
        e4m3_out = _run_k_from_v(problem, weights, v_scale=scale)
    assert log.names() == ["_k_from_v_rebuild_op", "_prefill_op"], log.names()
    assert_close_bf16(e4m3_out, e4m3_expected, "prefill_k_from_v, several query tokens, e4m3 V")


def test_prefill_k_from_v_keeps_the_k_from_v_op_where_it_serves():
    # One query token per sequence, a float64 out, and a pinned kernel that rebuilds K itself for
    # the call's dtypes: the K-from-V op as before; max_seqlen_q > 1 or another pin: the rebuild.
    decode = Problem(KFV_DECODE, seed=36)
    prompt = Problem(KFV_SEVERAL, seed=37)
    weights = _k_norm_weights(15)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    context = wideattn.default_context()

    def ops_of(problem, **kwargs):
        with _OpLog() as log:
            result = _run_k_from_v(problem, weights, **kwargs)
        return log.names(), result

    assert ops_of(decode)[0] == ["_k_from_v_op"]
    assert ops_of(decode, max_seqlen_q=1)[0] == ["_k_from_v_op"]
    assert ops_of(decode, max_seqlen_q=2)[0] == ["_k_from_v_rebuild_op", "_prefill_op"]
    names, exact = ops_of(prompt, out=torch.empty(prompt.q.shape, dtype=torch.float64))
    assert names == ["_k_from_v_op"], names
    expected, _ = prompt.expected(k_dequant=_rebuilt_k_cache(prompt, weights, frequencies))
    assert (exact - expected).abs().max().item() < 1e-9
    try:
        context.set_prefill_kernel("decode_bf16kfv_d512")
        names, pinned = ops_of(prompt)
        assert names == ["_k_from_v_op"], names
        assert_close_bf16(pinned, expected, "decode_bf16kfv_d512 pinned")
        # An e4m3 V cache: the pin is not for its dtypes, so the rebuild; the pin then restricts the
        # bf16 K + V prefill over the scratch to a kernel that reads no K cache: the library's refusal.
        scale = torch.ones(1)
        e4m3 = Problem(KFV_SEVERAL, seed=37)
        e4m3.v_cache = reference.quantize(e4m3.v_cache, scale)[0]
        with _OpLog() as log:
            harness.expect_raises(wideattn.UnsupportedError, ["restricted to kernel decode_bf16kfv_d512",
                                                              "serves only calls with WIDEATTN_FLAG_K_FROM_V"],
                                  _run_k_from_v, e4m3, weights, v_scale=scale)
        assert log.names() == ["_k_from_v_rebuild_op", "_prefill_op"], log.names()
        context.set_prefill_kernel("mma_bf16_d512")
        names, other = ops_of(prompt)
        assert names == ["_k_from_v_rebuild_op", "_prefill_op"], names
        assert_close_bf16(other, expected, "mma_bf16_d512 pinned")
    finally:
        context.set_prefill_kernel(None)


def test_prefill_k_from_v_falls_back_to_the_rebuild_where_no_kernel_rebuilds_k():
    # A device whose bundle has no K-from-V decode kernel (they are sm_90a's: an sm_120a or sm_89
    # GPU), stood in for by a K-from-V op that raises the library's UnsupportedError: a single-token
    # call takes the rebuild path with the same result, and later calls of its shape go there at
    # once; another shape tries the op again; a float64 out keeps the op's refusal.
    from wideattn import attention
    decode = Problem(KFV_DECODE, seed=38)
    weights = _k_norm_weights(16)
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, GEMMA4_ROTARY_DIMS, GEMMA4_THETA)
    expected, _ = decode.expected(k_dequant=_rebuilt_k_cache(decode, weights, frequencies))
    saved_op, refused = ops._k_from_v_op, []

    def unsupported(*args):
        refused.append(args[0].shape)
        raise wideattn.UnsupportedError("wideattn_prefill", "no kernel in the bundle rebuilds K here (stand-in)")

    attention._no_k_from_v_kernel.clear()
    ops._k_from_v_op = unsupported
    try:
        with _OpLog() as log:
            first = _run_k_from_v(decode, weights)
        assert log.names() == ["_k_from_v_op", "_k_from_v_rebuild_op", "_prefill_op"], log.names()
        assert_close_bf16(first, expected, "single-token call over the rebuild")
        with _OpLog() as log:
            second = _run_k_from_v(decode, weights)
        assert log.names() == ["_k_from_v_rebuild_op", "_prefill_op"], log.names()
        assert torch.equal(second, first)
        assert len(refused) == 1, refused
        harness.expect_raises(wideattn.UnsupportedError, ["stand-in"], _run_k_from_v, decode, weights,
                              out=torch.empty(decode.q.shape, dtype=torch.float64))
        assert len(refused) == 2, refused
    finally:
        ops._k_from_v_op = saved_op
        attention._no_k_from_v_kernel.clear()


def test_k_from_v_rebuild_hands_the_library_the_call_and_the_out_caches():
    # The CUDA implementation with its launch seam replaced (no GPU here): the params of the
    # K-from-V call (k_cache NULL, the flag and the check flag, o the given out, no lse, softmax
    # scale 1, no split, the description) and the wideattn_k_from_v_rebuild_out of k_out / v_out
    # (views of one vLLM-style tensor: their own strides) and the out table.
    problem = Problem(KFV_SEVERAL, seed=38)
    weights = _k_norm_weights(16)
    both = torch.zeros((2, 20, problem.block_size, problem.kv_heads, HEAD_DIM), dtype=torch.bfloat16)
    k_out, v_out = both[0], both[1]
    table = torch.zeros((len(KFV_SEVERAL), 8), dtype=torch.int32)[:, :3]
    out = torch.empty(problem.q.shape, dtype=torch.bfloat16)
    launched = []

    class Recorder:
        def launch_k_from_v_rebuild(self, params, target, stream):
            d = params.k_from_v.contents
            launched.append(((params.k_cache, params.k_block_stride, params.v_cache, params.o, params.lse,
                              params.flags, params.softmax_scale, params.num_splits, params.max_seqlen_q,
                              params.max_seqlen_k, params.total_q, d.k_norm_scale, d.rope_theta, d.rotary_dims),
                             (target.struct_size, target.reserved, target.k_cache, target.k_block_stride,
                              target.k_slot_stride, target.k_head_stride, target.v_cache, target.v_block_stride,
                              target.v_slot_stride, target.v_head_stride, target.block_table,
                              target.block_table_stride, target.num_blocks, target.reserved2), stream))

    real_context, real_launch = ops.default_context, ops._launch
    ops.default_context, ops._launch = (lambda: Recorder()), (lambda device, launch, params: launch(params, "stream"))
    try:
        layout = [0, problem.num_blocks, problem.block_size, problem.kv_heads] + list(problem.v_cache.stride()[:3])
        ops._k_from_v_rebuild_cuda(problem.q, problem.v_cache, problem.cu_seqlens_q, problem.seq_lens_k,
                                   problem.block_table, layout, None, weights, None, GEMMA4_THETA, GEMMA4_ROTARY_DIMS,
                                   out, k_out, v_out, table, 17, 40, _capi.FLAG_CHECK_METADATA)
    finally:
        ops.default_context, ops._launch = real_context, real_launch
    assert ctypes.sizeof(_capi.KFromVRebuildOut) == 96
    params, target, stream = launched[0]
    assert params == (None, 0, problem.v_cache.data_ptr(), out.data_ptr(), None,
                      _capi.FLAG_K_FROM_V | _capi.FLAG_CHECK_METADATA, ops.REBUILD_SOFTMAX_SCALE, 0, 17, 40,
                      problem.q.shape[0], weights.data_ptr(), GEMMA4_THETA, GEMMA4_ROTARY_DIMS), params
    assert target == (96, 0, k_out.data_ptr(), *k_out.stride()[:3], v_out.data_ptr(), *v_out.stride()[:3],
                      table.data_ptr(), 8, 20, 0), target
    assert stream == "stream" and len(launched) == 1


def test_k_from_v_rebuild_fake_implementation_runs_on_meta_tensors():
    meta, q, v, cu, lens, table, weights = _k_from_v_meta_inputs(20)
    k_out = torch.empty((8, 16, 2, HEAD_DIM), dtype=torch.bfloat16, device=meta)
    out = wideattn.k_from_v_rebuild(q, v, cu, lens, table, weights, GEMMA4_ROTARY_DIMS, k_out, k_out.clone(), table,
                                    rope_theta=GEMMA4_THETA)
    assert out.device == meta and tuple(out.shape) == (20, 16, HEAD_DIM) and out.dtype == torch.bfloat16
    schema = str(torch.ops.wideattn.k_from_v_rebuild.default._schema)
    assert "Tensor(a!) k_out" in schema and "Tensor(b!) v_out" in schema and "Tensor? cos_sin=None" in schema, schema
    # prefill_k_from_v's rebuild path with the hints: no read of the device's lengths.
    out = wideattn.prefill_k_from_v(q, v, cu, lens, table, 1.0, weights, GEMMA4_ROTARY_DIMS, rope_theta=GEMMA4_THETA,
                                    max_seqlen_q=16, max_seqlen_k=64)
    assert out.device == meta and tuple(out.shape) == (20, 16, HEAD_DIM)


if __name__ == "__main__":
    harness.run(dict(globals()))
