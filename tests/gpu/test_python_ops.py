"""test_python_ops.py - the wideattn Python package on a GPU (run by tools/gpu/gpu_suite.sh; exits
77, skipped, without torch or a CUDA device): the ops against wideattn.reference in float64 on
Gemma 4 31B global-layer shapes for every bf16 tier the device has, varlen_attention, the e4m3
path (scale, its power of two, quantise into a vLLM-layout cache, attention) with the quantise and scale steps bit
for bit against the reference, the transposed e4m3 V layout (quantised on the device, then the FP8
P V kernels with bf16 and e4m3 Q; sm_90a), library errors as exceptions, a side stream,
torch.compile(fullgraph=True) of a module calling the op, CUDA-graph capture and replay
bit-identical to eager calls, and split-KV decode: forced and automatic split counts against the
reference with bit-identical reruns, a captured split decode replayed bit-identical to eager,
decode over a V-only cache (prefill_k_from_v, bf16 and e4m3 V, with and without a cos / sin
table) against the reference's K rebuild, and calls with several query tokens over it: the keys
k_from_v_rebuild writes against the host's bit for bit, and prefill_k_from_v through the rebuild
against the fp64 path; and a served decode layer of wideattn.transformers, which runs its plan
without torch's dispatcher, against float64 and bit for bit against the op path.

usage: PYTHONPATH=build/python python3 tests/gpu/test_python_ops.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import harness  # noqa: E402

harness.require_cuda()
import torch  # noqa: E402

import wideattn  # noqa: E402
from wideattn import ops, reference  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 512, 16
SEQS = [(1000, 1000), (333, 2049), (1, 700), (4, 4100), (77, 77)]
REL_L2_BF16 = 1e-2
REL_L2_E4M3 = 0.15
LSE_TOL = 1e-3


def rel_l2(actual, expected):
    return ((actual.double() - expected).norm() / expected.norm()).item()


class Case:
    """A vLLM-layout cache [2, num_blocks, 16, 4, 512] with shuffled blocks and a mixed batch."""

    def __init__(self, seqs=SEQS, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        pages = [-(-length // BLOCK) for _, length in seqs]
        self.num_blocks = sum(pages) + 1
        self.kv_cache = torch.randn((2, self.num_blocks, BLOCK, KV_HEADS, HEAD_DIM), device="cuda",
                                    generator=g).bfloat16()
        order = torch.randperm(self.num_blocks, device="cuda", generator=g).int()
        self.block_table = torch.zeros((len(seqs), max(pages)), dtype=torch.int32, device="cuda")
        used = 0
        for s, n in enumerate(pages):
            self.block_table[s, :n] = order[used:used + n]
            used += n
        cu = [0]
        for q_len, _ in seqs:
            cu.append(cu[-1] + q_len)
        self.cu = torch.tensor(cu, dtype=torch.int32, device="cuda")
        self.lens = torch.tensor([k for _, k in seqs], dtype=torch.int32, device="cuda")
        self.q = torch.randn((cu[-1], Q_HEADS, HEAD_DIM), device="cuda", generator=g).bfloat16()
        self.scale = HEAD_DIM ** -0.5
        self.max_k = max(k for _, k in seqs)

    def layout(self, cache):
        return [0, cache.shape[0], cache.shape[1], cache.shape[2]] + list(cache.stride()[:3])

    def expected(self, k=None, v=None, k_scale=None, v_scale=None):
        k = self.kv_cache[0] if k is None else k
        v = self.kv_cache[1] if v is None else v
        return reference.attention(self.q, k, v, self.cu, self.lens, self.block_table, self.layout(k),
                                   self.layout(v), self.scale, None, k_scale, v_scale)

    def run(self, **kwargs):
        return wideattn.prefill(self.q, self.kv_cache[0], self.kv_cache[1], self.cu, self.lens, self.block_table,
                                self.scale, **kwargs)


def test_prefill_against_the_reference_on_every_tier():
    case = Case()
    expected, expected_lse = case.expected()
    context = wideattn.default_context()
    names = {k.name for k in context.kernels() if k.kind == "prefill" and k.q_dtype == "bf16" and k.o_dtype == "bf16"}
    for pinned in [None] + sorted(names):
        context.set_prefill_kernel(pinned)
        out, lse = case.run(lse=True)
        torch.cuda.synchronize()
        error = rel_l2(out, expected)
        assert error <= REL_L2_BF16, (pinned, error)
        assert (lse.double() - expected_lse).abs().max().item() <= LSE_TOL, pinned
        print(f"  {pinned or 'automatic'}: rel L2 {error:.3e}")
    context.set_prefill_kernel(None)


def test_varlen_attention_against_the_reference():
    case = Case(seed=1)
    expected, _ = case.expected()
    keys = [reference.gather_keys(case.kv_cache[0], case.layout(case.kv_cache[0]), case.block_table[s], k, HEAD_DIM,
                                  torch.bfloat16) for s, (_, k) in enumerate(SEQS)]
    values = [reference.gather_keys(case.kv_cache[1], case.layout(case.kv_cache[1]), case.block_table[s], k,
                                    HEAD_DIM, torch.bfloat16) for s, (_, k) in enumerate(SEQS)]
    cu_k = torch.tensor([0] + torch.cumsum(torch.tensor([k for _, k in SEQS]), 0).tolist(), dtype=torch.int32,
                        device="cuda")
    out = wideattn.varlen_attention(case.q, torch.cat(keys), torch.cat(values), case.cu, cu_k, None, case.max_k,
                                    case.scale)
    assert rel_l2(out, expected) <= REL_L2_BF16


def test_e4m3_cache_path():
    case = Case(seed=2)
    cache = torch.empty(case.kv_cache.shape, dtype=getattr(torch, "float8_e4m3fn", torch.uint8), device="cuda")
    flat = [case.kv_cache[i].reshape(-1, KV_HEADS, HEAD_DIM) for i in (0, 1)]
    slots = torch.arange(flat[0].shape[0], device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    scales = [wideattn.compute_scale(flat[i], nonfinite_count=counter) for i in (0, 1)]
    for i in (0, 1):
        wideattn.quantize_to_cache(flat[i], cache[i], slots, scales[i])
        expected_scale, _ = reference.compute_scale(flat[i].cpu())
        assert torch.equal(scales[i].cpu(), expected_scale), "scale not bit-exact"
        codes, _ = reference.quantize(flat[i].cpu(), scales[i].cpu())
        assert torch.equal(reference.e4m3_codes(cache[i]).reshape(-1, KV_HEADS, HEAD_DIM).cpu(), codes)
    assert counter.item() == 0
    for i in (0, 1):   # the power-of-two scale of the same launch (wideattn_compute_scale_pow2)
        rounded = wideattn.compute_scale(flat[i], power_of_two=True)
        expected_scale, _ = reference.compute_scale(flat[i].cpu())
        assert torch.equal(rounded.cpu(), reference.power_of_two_scale(expected_scale)), "pow2 scale not bit-exact"
    out = wideattn.prefill(case.q, cache[0], cache[1], case.cu, case.lens, case.block_table, case.scale,
                           k_scale=scales[0], v_scale=scales[1])
    expected, _ = case.expected(cache[0], cache[1], scales[0], scales[1])
    assert rel_l2(out, expected) <= REL_L2_E4M3


def test_transposed_v_cache_path():
    # V quantised into the transposed layout on the device (bit for bit the engine layout's codes
    # rearranged), then the FP8 P V kernels (sm_90a) against the reference on the engine layout.
    if torch.cuda.get_device_capability() != (9, 0):
        print("    (skipped: the transposed V layout's kernels are sm_90a only)")
        return
    case = Case(seed=5)
    e4m3 = getattr(torch, "float8_e4m3fn", torch.uint8)
    flat = [case.kv_cache[i].reshape(-1, KV_HEADS, HEAD_DIM) for i in (0, 1)]
    slots = torch.arange(flat[0].shape[0], device="cuda")
    scales = [wideattn.compute_scale(flat[i]) for i in (0, 1)]
    k_cache = torch.empty(case.kv_cache.shape[1:], dtype=e4m3, device="cuda")
    v_engine = torch.empty(case.kv_cache.shape[1:], dtype=e4m3, device="cuda")
    v_t = torch.empty((case.num_blocks, KV_HEADS, HEAD_DIM, BLOCK), dtype=e4m3, device="cuda")
    wideattn.quantize_to_cache(flat[0], k_cache, slots, scales[0])
    wideattn.quantize_to_cache(flat[1], v_engine, slots, scales[1])
    wideattn.quantize_to_cache(flat[1], v_t, slots, scales[1], v_transposed=True)
    assert torch.equal(reference.e4m3_codes(v_t), reference.e4m3_codes(reference.transposed_v_cache(v_engine)))
    expected, _ = case.expected(k_cache, v_engine, scales[0], scales[1])
    for q_kind in ("bf16", "e4m3"):
        q, q_scale = case.q, None
        if q_kind == "e4m3":
            q_scale = wideattn.compute_scale(case.q)
            q = wideattn.quantize(case.q, q_scale)
            expected, _ = reference.attention(q, k_cache, v_engine, case.cu, case.lens, case.block_table,
                                                         case.layout(k_cache), case.layout(v_engine), case.scale,
                                                         q_scale, scales[0], scales[1])
        out = torch.full(case.q.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
        out, lse = wideattn.prefill(q, k_cache, v_t, case.cu, case.lens, case.block_table, case.scale, out=out,
                                    lse=True, q_scale=q_scale, k_scale=scales[0], v_scale=scales[1],
                                    v_transposed=True)
        again = wideattn.prefill(q, k_cache, v_t, case.cu, case.lens, case.block_table, case.scale, q_scale=q_scale,
                                 k_scale=scales[0], v_scale=scales[1], v_transposed=True)
        assert torch.isfinite(out).all(), q_kind
        assert rel_l2(out, expected) <= REL_L2_E4M3, (q_kind, rel_l2(out, expected))
        assert torch.equal(out, again), q_kind


def test_library_errors_on_the_device():
    case = Case([(5, 20)], seed=3)
    narrow = case.kv_cache[0][..., :256]
    harness.expect_raises(wideattn.InvalidArgumentError, ["k_cache.shape[3] is 256"], wideattn.prefill, case.q,
                          narrow, narrow, case.cu, case.lens, case.block_table, 1.0)
    wide_group = case.q.repeat(1, 2, 1)
    harness.expect_raises(wideattn.UnsupportedError, ["WIDEATTN_ERROR_UNSUPPORTED", "not num_q_heads/num_kv_heads=16"],
                          wideattn.prefill, wide_group, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens,
                          case.block_table, 1.0)


def test_side_stream_matches_the_default_stream():
    case = Case(seed=4)
    reference_out = case.run()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = case.run()
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(out, reference_out)


class Layer(torch.nn.Module):
    def forward(self, q, k_cache, v_cache, cu, lens, table):
        return wideattn.prefill(q, k_cache, v_cache, cu, lens, table, 1.0) * 2


def test_torch_compile_fullgraph():
    if not hasattr(torch, "compile"):
        harness.skip("torch without torch.compile")
    case = Case(seed=5)
    args = (case.q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table)
    eager = Layer()(*args)
    compiled = torch.compile(Layer(), fullgraph=True)
    assert torch.equal(compiled(*args), eager)


def test_cuda_graph_replay_is_bit_identical():
    case = Case(seed=6)
    static_q = case.q.clone()
    out = torch.empty_like(case.q)
    lse = torch.empty((Q_HEADS, case.q.shape[0]), device="cuda")

    def step():
        wideattn.prefill(static_q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table,
                         case.scale, out=out, lse=lse)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()                                   # warm-up: modules load outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for seed in (7, 8):
        fresh = Case(seed=seed).q
        static_q.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        eager_out, eager_lse = wideattn.prefill(fresh, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens,
                                                case.block_table, case.scale, lse=True)
        assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse), seed


DECODE_SEQS = [(1, 20000), (1, 4100), (2, 700), (0, 33), (1, 1)]
SPLIT_COUNTS = (None, 1, 2, 7, 33, 128)


def _decode_case(seed):
    case = Case(DECODE_SEQS, seed=seed)
    case.max_q = max(q for q, _ in DECODE_SEQS)
    return case


def _device_plan(case, **fields):
    """The library's plan for the case's call on this device (hints filled from the host)."""
    out = torch.empty_like(case.q)
    params = ops.prefill_params(case.q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table,
                                case.layout(case.kv_cache[0]), case.layout(case.kv_cache[1]), case.scale, None, None,
                                None, out, None, case.max_q, case.max_k, fields.get("num_splits", 0))
    properties = torch.cuda.get_device_properties(case.q.device)
    return wideattn.default_context().plan_launch(params, (properties.major, properties.minor),
                                                  properties.multi_processor_count)


def test_split_decode_against_the_reference():
    case = _decode_case(9)
    expected, expected_lse = case.expected()
    plan = _device_plan(case)
    assert plan.preferred_splits > 1, plan                  # a decode batch on a whole GPU splits
    for splits in SPLIT_COUNTS:
        out, lse = case.run(lse=True, max_seqlen_q=case.max_q, max_seqlen_k=case.max_k, num_splits=splits)
        again, again_lse = case.run(lse=True, max_seqlen_q=case.max_q, max_seqlen_k=case.max_k, num_splits=splits)
        torch.cuda.synchronize()
        error = rel_l2(out, expected)
        assert error <= REL_L2_BF16, (splits, error)
        assert (lse.double() - expected_lse).abs().max().item() <= LSE_TOL, splits
        assert torch.equal(out, again) and torch.equal(lse, again_lse), f"rerun differs at num_splits={splits}"
        print(f"  num_splits={splits}: rel L2 {error:.3e}")
    print(f"  automatic: {plan.preferred_splits} splits, {plan.workspace_bytes} bytes of workspace")


def test_cuda_graph_capture_of_a_split_decode_is_bit_identical():
    case = _decode_case(10)
    static_q = case.q.clone()
    for splits in (7, None):
        out = torch.empty_like(case.q)
        lse = torch.empty((Q_HEADS, case.q.shape[0]), device="cuda")

        def step():
            wideattn.prefill(static_q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table,
                             case.scale, out=out, lse=lse, max_seqlen_q=case.max_q, max_seqlen_k=case.max_k,
                             num_splits=splits)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()                               # warm-up: the kernel and merge modules load outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        for seed in (11, 12):
            fresh = _decode_case(seed).q
            static_q.copy_(fresh)
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            eager_out, eager_lse = wideattn.prefill(fresh, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens,
                                                    case.block_table, case.scale, lse=True, max_seqlen_q=case.max_q,
                                                    max_seqlen_k=case.max_k, num_splits=splits)
            assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse), (splits, seed)
        del graph


def test_k_from_v_decode_against_the_reference():
    # wideattn.prefill_k_from_v (a V-only cache, K rebuilt from V with Gemma 4's description) on the
    # decode kernels over the V half of the vLLM-layout cache, bf16 and e4m3, against
    # wideattn.reference with the same K rebuild (reference.k_from_v_keys) in float64; a rerun bit
    # for bit; with the model's frequencies as a table the same bits as from theta (the table holds
    # the formula's values); a float64 out (the fp64 kernel) close to the reference.
    seqs = [(1, 1000), (1, 2049), (1, 700), (1, 40000)]
    case = Case(seqs, seed=7)
    rotary, theta = 128, 1.0e6
    g = torch.Generator(device="cuda").manual_seed(8)
    weights = (1.0 + 0.25 * torch.randn(HEAD_DIM, device="cuda", generator=g)).bfloat16().float()
    frequencies = reference.k_from_v_inv_freq(HEAD_DIM, rotary, theta)
    table = frequencies[:rotary // 2].cuda()
    v = case.kv_cache[1]

    def run(cache, **kwargs):
        return wideattn.prefill_k_from_v(case.q, cache, case.cu, case.lens, case.block_table, case.scale, weights,
                                         rotary, **kwargs)

    def expected(cache, v_scale=None):
        return reference.attention(case.q, cache, cache, case.cu, case.lens, case.block_table, case.layout(cache),
                                   case.layout(cache), case.scale, None, None, v_scale, k_from_v=(weights, frequencies))

    out, lse = run(v, rope_theta=theta, lse=True)
    again = run(v, rope_theta=theta)
    with_table = run(v, inv_freq=table)
    torch.cuda.synchronize()
    reference_out, reference_lse = expected(v)
    error = rel_l2(out, reference_out)
    print(f"  bf16 V: rel L2 {error:.3e}")
    assert error <= REL_L2_BF16, error
    assert (lse.double() - reference_lse).abs().max().item() <= LSE_TOL
    assert torch.equal(out, again) and torch.equal(out, with_table)
    exact = run(v, rope_theta=theta, out=torch.empty(case.q.shape, dtype=torch.float64, device="cuda"))
    exact_error = rel_l2(exact, reference_out)
    print(f"  bf16 V, float64 out: rel L2 {exact_error:.3e}")
    assert exact_error <= 1e-6, exact_error
    scale = wideattn.compute_scale(v.reshape(-1, KV_HEADS, HEAD_DIM))
    codes = torch.empty(v.shape, dtype=getattr(torch, "float8_e4m3fn", torch.uint8), device="cuda")
    wideattn.quantize_to_cache(v.reshape(-1, KV_HEADS, HEAD_DIM), codes, torch.arange(v.shape[0] * BLOCK,
                               device="cuda"), scale)
    e4m3 = run(codes, rope_theta=theta, v_scale=scale)
    torch.cuda.synchronize()
    e4m3_error = rel_l2(e4m3, expected(codes, scale)[0])
    print(f"  e4m3 V: rel L2 {e4m3_error:.3e}")
    assert e4m3_error <= REL_L2_BF16, e4m3_error
    # A cos / sin table from wideattn.k_from_v_cos_sin over every key: the same bits as without it;
    # one of another theta over part of the keys: the reference reading the same table.
    positions = int(case.lens.max())
    filled = wideattn.k_from_v_cos_sin(rotary, positions, rope_theta=theta, device="cuda")
    with_filled = run(v, rope_theta=theta, cos_sin=filled)
    e4m3_filled = run(codes, rope_theta=theta, v_scale=scale, cos_sin=filled)
    other = wideattn.k_from_v_cos_sin(rotary, 2049, rope_theta=1.0e4, device="cuda")
    with_other = run(v, rope_theta=theta, cos_sin=other)
    torch.cuda.synchronize()
    assert torch.equal(with_filled, out) and torch.equal(e4m3_filled, e4m3)
    other_reference = reference.attention(case.q, v, v, case.cu, case.lens, case.block_table, case.layout(v),
                                          case.layout(v), case.scale, None, None, None,
                                          k_from_v=(weights, frequencies, other))[0]
    other_error = rel_l2(with_other, other_reference)
    print(f"  bf16 V, a cos / sin table of another theta over 2049 positions: rel L2 {other_error:.3e}")
    assert other_error <= REL_L2_BF16, other_error


KFV_SEVERAL = [(5, 1005), (300, 300), (1, 78)]   # q_lens 5, 300, 1 after contexts 1000, 0, 77


def _k_from_v_setup(case):
    rotary, theta = 128, 1.0e6
    g = torch.Generator(device="cuda").manual_seed(13)
    weights = (1.0 + 0.25 * torch.randn(HEAD_DIM, device="cuda", generator=g)).bfloat16().float()
    return rotary, theta, weights, reference.k_from_v_inv_freq(HEAD_DIM, rotary, theta)


def _e4m3_v(v):
    """v [num_blocks, 16, 4, 512] bf16 quantised into an e4m3 V cache on the device: (codes, scale)."""
    scale = wideattn.compute_scale(v.reshape(-1, KV_HEADS, HEAD_DIM))
    codes = torch.empty(v.shape, dtype=getattr(torch, "float8_e4m3fn", torch.uint8), device="cuda")
    wideattn.quantize_to_cache(v.reshape(-1, KV_HEADS, HEAD_DIM), codes,
                               torch.arange(v.shape[0] * BLOCK, device="cuda"), scale)
    return codes, scale


def test_k_from_v_rebuild_writes_the_decode_kernels_keys():
    # wideattn.k_from_v_rebuild (C API 0.8.0) of a varlen call over the shuffled V half of the
    # vLLM-layout cache into shuffled out pages: with a cos / sin table from the library
    # (wideattn.k_from_v_cos_sin, the kernels' own values) K equals the host's
    # reference.k_from_v_keys reading the same table bit for bit, and without it the same bits
    # (the formula); V a bit-exact copy for a bf16 cache and bf16(code x scale) for e4m3 (K from
    # the float32 values); slots of no key keep their sentinel.
    case = Case(KFV_SEVERAL, seed=14)
    rotary, theta, weights, frequencies = _k_from_v_setup(case)
    v = case.kv_cache[1]
    width = case.block_table.shape[1]
    pages = len(KFV_SEVERAL) * width + 3
    g = torch.Generator(device="cuda").manual_seed(15)
    out_table = torch.randperm(pages, device="cuda", generator=g)[:len(KFV_SEVERAL) * width].int()
    out_table = out_table.view(len(KFV_SEVERAL), width).contiguous()
    shape = (pages, BLOCK, KV_HEADS, HEAD_DIM)
    table = wideattn.k_from_v_cos_sin(rotary, case.max_k, rope_theta=theta, device="cuda")
    for kind in ("bf16", "e4m3"):
        cache, v_scale = (v, None) if kind == "bf16" else _e4m3_v(v)
        results = {}
        for with_table in (True, False):
            k_out = torch.full(shape, -3.0, dtype=torch.bfloat16, device="cuda")
            v_out = torch.full(shape, -3.0, dtype=torch.bfloat16, device="cuda")
            wideattn.k_from_v_rebuild(case.q, cache, case.cu, case.lens, case.block_table, weights, rotary, k_out,
                                      v_out, out_table, rope_theta=theta, v_scale=v_scale,
                                      cos_sin=table if with_table else None, max_seqlen_k=case.max_k)
            results[with_table] = (k_out, v_out)
        torch.cuda.synchronize()
        k_out, v_out = results[True]
        assert torch.equal(k_out, results[False][0]) and torch.equal(v_out, results[False][1]), kind
        host_table, host_out_table = table.cpu(), out_table.cpu()
        expected_k = torch.full(shape, -3.0, dtype=torch.bfloat16)
        expected_v = torch.full(shape, -3.0, dtype=torch.bfloat16)
        for s, (_, length) in enumerate(KFV_SEVERAL):
            values = reference.gather_keys(cache, case.layout(cache), case.block_table[s], length, HEAD_DIM,
                                           torch.float32, v_scale).cpu()
            keys = reference.k_from_v_keys(values, torch.arange(length), weights.cpu(), frequencies, host_table)
            rows = host_out_table[s, torch.arange(length) // BLOCK].long()
            expected_k[rows, torch.arange(length) % BLOCK] = keys
            expected_v[rows, torch.arange(length) % BLOCK] = values.bfloat16()
        differing = (k_out.cpu() != expected_k).sum().item()
        print(f"  {kind} V: {differing} K elements differ from the host's, "
              f"{(v_out.cpu() != expected_v).sum().item()} V elements")
        assert torch.equal(k_out.cpu(), expected_k), kind
        assert torch.equal(v_out.cpu(), expected_v), kind


def test_prefill_k_from_v_with_several_query_tokens_against_the_fp64_path():
    # prefill_k_from_v on a varlen batch with a chunk, a prompt and a decode (q_lens 5, 300, 1 after
    # contexts 1000, 0, 77; 32 query heads over 4 KV heads, pages of 16 shuffled): the rebuild into
    # a scratch, then the K + V prefill kernel; against the fp64 kernel's K-from-V call (float64
    # out) for a bf16 V cache and the float64 reference over the same K rebuild for e4m3 V, within
    # bf16's tolerance; the LSE too; with the hints too; and the caller's own k_from_v_rebuild into a
    # shuffled scratch followed by wideattn.prefill.
    case = Case(KFV_SEVERAL, seed=16)
    rotary, theta, weights, frequencies = _k_from_v_setup(case)
    v = case.kv_cache[1]

    def run(cache, **kwargs):
        return wideattn.prefill_k_from_v(case.q, cache, case.cu, case.lens, case.block_table, case.scale, weights,
                                         rotary, rope_theta=theta, **kwargs)

    out, lse = run(v, lse=True)
    hinted = run(v, max_seqlen_q=300, max_seqlen_k=case.max_k)
    exact, exact_lse = run(v, out=torch.empty(case.q.shape, dtype=torch.float64, device="cuda"), lse=True)
    torch.cuda.synchronize()
    error = rel_l2(out, exact)
    print(f"  bf16 V: rel L2 {error:.3e} against the fp64 kernel's K-from-V call")
    assert error <= REL_L2_BF16, error
    assert (lse.double() - exact_lse).abs().max().item() <= LSE_TOL
    assert rel_l2(hinted, exact) <= REL_L2_BF16, rel_l2(hinted, exact)
    reference_out, _ = reference.attention(case.q, v, v, case.cu, case.lens, case.block_table, case.layout(v),
                                           case.layout(v), case.scale, None, None, None,
                                           k_from_v=(weights, frequencies))
    assert rel_l2(exact, reference_out) <= 1e-6, rel_l2(exact, reference_out)
    # The same call assembled by the caller: rebuild into shuffled pages of its own, then prefill.
    width = case.block_table.shape[1]
    g = torch.Generator(device="cuda").manual_seed(17)
    table = torch.randperm(len(KFV_SEVERAL) * width, device="cuda", generator=g).int().view(len(KFV_SEVERAL), width)
    k_out = torch.empty((len(KFV_SEVERAL) * width, BLOCK, KV_HEADS, HEAD_DIM), dtype=torch.bfloat16, device="cuda")
    v_out = torch.empty_like(k_out)
    own = wideattn.k_from_v_rebuild(case.q, v, case.cu, case.lens, case.block_table, weights, rotary, k_out, v_out,
                                    table, rope_theta=theta)
    own = wideattn.prefill(case.q, k_out, v_out, case.cu, case.lens, table, case.scale, out=own)
    torch.cuda.synchronize()
    own_error = rel_l2(own, exact)
    print(f"  bf16 V, k_from_v_rebuild + prefill: rel L2 {own_error:.3e}")
    assert own_error <= REL_L2_BF16, own_error
    codes, v_scale = _e4m3_v(v)
    e4m3, e4m3_lse = run(codes, v_scale=v_scale, lse=True)
    e4m3_reference, e4m3_reference_lse = reference.attention(case.q, codes, codes, case.cu, case.lens,
                                                             case.block_table, case.layout(codes), case.layout(codes),
                                                             case.scale, None, None, v_scale,
                                                             k_from_v=(weights, frequencies))
    torch.cuda.synchronize()
    e4m3_error = rel_l2(e4m3, e4m3_reference)
    print(f"  e4m3 V: rel L2 {e4m3_error:.3e} against the float64 reference")
    assert e4m3_error <= REL_L2_BF16, e4m3_error
    assert (e4m3_lse.double() - e4m3_reference_lse).abs().max().item() <= LSE_TOL


class _Layer:
    """The attributes of a transformers attention module that wideattn.transformers reads."""

    is_causal = True
    training = False
    layer_idx = 0


def test_transformers_decode_layer_runs_its_plan_without_the_dispatcher():
    """A served decode layer of wideattn.transformers (one query per row over a DynamicCache's exact
    K/V [B, 4, S, 512], no mask) runs its cached plan directly (ops._run_cached_plan, no torch
    dispatcher): against the float64 softmax of the same tensors, and bit for bit against the same
    calls through the Python op (the dispatcher path), at key counts on both sides of the split
    path."""
    import wideattn.transformers as wa_hf
    g = torch.Generator(device="cuda").manual_seed(11)
    batch, scale = 2, 1.0
    direct = {"calls": 0}
    run_cached_plan = ops._run_cached_plan

    def counting(*args):
        direct["calls"] += 1
        return run_cached_plan(*args)

    previous = wa_hf.set_decode_reuse(True)
    try:
        for kv_len in (300, 4100):
            query = torch.randn((batch, 1, Q_HEADS, HEAD_DIM), device="cuda", generator=g).bfloat16().transpose(1, 2)
            key = torch.randn((batch, KV_HEADS, kv_len, HEAD_DIM), device="cuda", generator=g).bfloat16()
            value = torch.randn((batch, KV_HEADS, kv_len, HEAD_DIM), device="cuda", generator=g).bfloat16()
            ops._run_cached_plan, before = counting, direct["calls"]
            try:
                out, _ = wa_hf.attention_forward(_Layer(), query, key, value, None, scaling=scale)
            finally:
                ops._run_cached_plan = run_cached_plan
            assert direct["calls"] == before + 1, f"S={kv_len}: the layer did not run its plan directly"
            ops._prefill_packed_op = lambda *args: ops.PYTHON_PACKED_OP(*args)
            try:
                through_op, _ = wa_hf.attention_forward(_Layer(), query, key, value, None, scaling=scale)
            finally:
                ops._prefill_packed_op = ops.PYTHON_PACKED_OP
            assert direct["calls"] == before + 1, f"S={kv_len}: the op path ran the plan directly"
            group = Q_HEADS // KV_HEADS
            k64 = key.double().repeat_interleave(group, dim=1)
            v64 = value.double().repeat_interleave(group, dim=1)
            weights = torch.softmax(query.double() @ k64.transpose(-1, -2) * scale, dim=-1)
            expected = (weights @ v64).transpose(1, 2)          # [B, 1, Hq, D] as the layer returns it
            torch.cuda.synchronize()
            error = rel_l2(out, expected)
            print(f"  S={kv_len}: rel L2 {error:.3e} against float64; the op path bit-identical")
            assert error <= REL_L2_BF16, (kv_len, error)
            assert torch.equal(out, through_op), f"S={kv_len}: the direct run differs from the op's"
    finally:
        wa_hf.set_decode_reuse(previous)


if __name__ == "__main__":
    harness.run(dict(globals()))
