"""test_cpp_ops.py - the C++ op wideattn_cpp::prefill_packed (wideattn.cpp_ops) on a GPU (exits 77,
skipped, without torch or a CUDA device; fails when the op does not build): built and loaded, it
serves wideattn.prefill's eager calls with the same bits as the Python op, runs one plan per
step's metadata over several layers (hits counted in C++), forgets its handles when the package's
plans are closed, leaves debug mode and CUDA-graph capture to the Python path (a captured call
replays bit-identical to an eager one), and keeps the CPU implementation.

usage: PYTHONPATH=build/python python3 tests/gpu/test_cpp_ops.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import harness  # noqa: E402

harness.require_cuda()
import torch  # noqa: E402

import wideattn  # noqa: E402
from wideattn import cpp_ops, ops  # noqa: E402
from test_python_ops import REL_L2_BF16, Case, _decode_case, rel_l2  # noqa: E402

_start = time.perf_counter()
cpp_ops.load()
print(f"  C++ op loaded in {time.perf_counter() - _start:.1f} s")
PYTHON_OP = torch.ops.wideattn.prefill_packed.default


def _packed_args(case, k, v, out):
    config = ops.pack_config(case.layout(k), case.layout(v), case.max_q, case.max_k, 0, 0)
    return (case.q, k, v, case.cu, case.lens, case.block_table, out, config, case.scale)


def test_the_public_function_runs_the_cpp_op():
    assert cpp_ops.loaded() and ops._prefill_packed_op is torch.ops.wideattn_cpp.prefill_packed.default


def test_same_bits_as_the_python_op_and_within_the_reference():
    case = _decode_case(21)
    expected, _ = case.expected()
    k, v = case.kv_cache[0], case.kv_cache[1]
    out_python, out_cpp = torch.empty_like(case.q), torch.empty_like(case.q)
    PYTHON_OP(*_packed_args(case, k, v, out_python))
    ops._prefill_packed_op(*_packed_args(case, k, v, out_cpp))       # miss: the slow path runs it
    again = torch.empty_like(case.q)
    ops._prefill_packed_op(*_packed_args(case, k, v, again))         # hit: C++ runs the plan
    torch.cuda.synchronize()
    assert torch.equal(out_python, out_cpp) and torch.equal(out_cpp, again)
    error = rel_l2(again, expected)
    assert error <= REL_L2_BF16, error
    public = wideattn.prefill(case.q, k, v, case.cu, case.lens, case.block_table, case.scale,
                              max_seqlen_q=case.max_q, max_seqlen_k=case.max_k)
    torch.cuda.synchronize()
    assert torch.equal(public, out_python)
    print(f"  rel L2 {error:.3e}; stats {cpp_ops.stats()}")


def test_layers_of_a_step_run_one_plan_and_closing_plans_forgets_it():
    case = _decode_case(22)
    layers = [(case.kv_cache[0].clone(), case.kv_cache[1].clone()) for _ in range(4)]
    ops.plans.clear()
    before = cpp_ops.stats()
    assert before["plans"] == 0, before
    outs = []
    for k, v in layers:
        out = torch.empty_like(case.q)
        ops._prefill_packed_op(*_packed_args(case, k, v, out))
        outs.append(out)
    after = cpp_ops.stats()
    assert after["misses"] - before["misses"] == 1 and after["hits"] - before["hits"] == 3, (before, after)
    assert after["plans"] == 1 and len(ops.plans) == 1, (after, len(ops.plans))
    for (k, v), out in zip(layers, outs):
        reference = torch.empty_like(case.q)
        PYTHON_OP(*_packed_args(case, k, v, reference))
        torch.cuda.synchronize()
        assert torch.equal(out, reference)
    ops.plans.clear()
    assert cpp_ops.stats()["plans"] == 0


def test_debug_mode_and_capture_take_the_python_path():
    case = _decode_case(23)
    k, v = case.kv_cache[0], case.kv_cache[1]
    eager = torch.empty_like(case.q)
    ops._prefill_packed_op(*_packed_args(case, k, v, eager))
    previous = wideattn.set_debug(True)
    try:
        before = cpp_ops.stats()
        debug = torch.empty_like(case.q)
        ops._prefill_packed_op(*_packed_args(case, k, v, debug))
        assert cpp_ops.stats()["hits"] == before["hits"], (before, cpp_ops.stats())
    finally:
        wideattn.set_debug(previous)
    static_q = case.q.clone()
    out = torch.empty_like(case.q)
    config = ops.pack_config(case.layout(k), case.layout(v), case.max_q, case.max_k, 0, 0)

    def step():
        ops._prefill_packed_op(static_q, k, v, case.cu, case.lens, case.block_table, out, config, case.scale)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    fresh = _decode_case(24).q
    static_q.copy_(fresh)
    out.fill_(float("nan"))
    graph.replay()
    expected = torch.empty_like(case.q)
    ops._prefill_packed_op(fresh, k, v, case.cu, case.lens, case.block_table, expected, config, case.scale)
    torch.cuda.synchronize()
    assert torch.equal(debug, eager) and torch.equal(out, expected)
    del graph


def test_cpu_tensors_keep_the_reference_path():
    case = Case([(3, 40), (1, 17)], seed=25)
    cpu = [t.cpu() for t in (case.q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table)]
    out = wideattn.prefill(*cpu, case.scale)
    expected = wideattn.prefill(case.q, case.kv_cache[0], case.kv_cache[1], case.cu, case.lens, case.block_table,
                                case.scale)
    torch.cuda.synchronize()
    error = rel_l2(out, expected.cpu().double())
    assert error <= REL_L2_BF16, error


if __name__ == "__main__":
    harness.run(dict(globals()))
