"""test_integrations.py - the transformers integration's mapping and the serving backend sketch on
the CPU, through the ops' CPU (reference) implementation (transformers itself is not installed
here: its SDPA fallback is replaced by a recorder, and its paged cache by stand-ins with the
update() contracts of the versions the integration was written against; the GPU test
tests/gpu/test_transformers_gemma4.py runs the real thing), and the host-side length hints and
split count each path hands the op.

usage: python3 test_integrations.py   (PYTHONPATH = build/python, WIDEATTN_BUNDLE = build/bundle)
"""


import harness

harness.require_torch()
import torch  # noqa: E402

import wideattn  # noqa: E402
import wideattn.transformers as hf  # noqa: E402
from wideattn import ops, reference, serving  # noqa: E402
from paged_problem import GROUP, HEAD_DIM, Problem, assert_close_bf16, dense_attention  # noqa: E402

KV_HEADS = 2
Q_HEADS = KV_HEADS * GROUP
SCALE = 1.0


class Module:
    """The attributes transformers' attention modules carry."""

    is_causal = True
    training = False
    layer_idx = 0


class Recorder:
    """Stands in for transformers' SDPA function: records that a call was handed over."""

    def __init__(self):
        self.calls = []

    def __call__(self, paged):
        def sdpa(module, query, key, value, attention_mask, **kwargs):
            self.calls.append((paged, query.shape, kwargs))
            return "sdpa", None
        return sdpa


def _setup():
    hf.CPU_REFERENCE = True
    recorder = Recorder()
    hf._fallback = recorder
    return recorder


def _qkv(batch, q_len, kv_len, seed, head_dim=HEAD_DIM):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn((batch, q_len, Q_HEADS, head_dim), generator=generator).bfloat16().transpose(1, 2)
    key = torch.randn((batch, KV_HEADS, kv_len, head_dim), generator=generator).bfloat16()
    value = torch.randn((batch, KV_HEADS, kv_len, head_dim), generator=generator).bfloat16()
    return query, key, value


def _allowed(starts, ends, q_len, kv_len):
    rows = torch.arange(q_len)[:, None]
    cols = torch.arange(kv_len)[None, :]
    return torch.stack([(cols >= s) & (cols <= e - q_len + rows) for s, e in zip(starts, ends)])


def _check_rows(out, expected, allowed, what):
    valid = allowed.any(dim=-1)                                  # [B, T]
    assert_close_bf16(out[valid], expected[valid], what)
    assert (out[~valid] == 0).all(), f"{what}: padded query rows not zero"


def test_causal_without_mask_runs_on_wideattn():
    recorder = _setup()
    for q_len, kv_len in ((9, 9), (1, 37), (5, 21)):
        query, key, value = _qkv(2, q_len, kv_len, q_len)
        out, weights = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
        allowed = _allowed([0, 0], [kv_len, kv_len], q_len, kv_len)
        assert weights is None and tuple(out.shape) == (2, q_len, Q_HEADS, HEAD_DIM)
        assert_close_bf16(out, dense_attention(query, key, value, allowed, SCALE), f"T={q_len} S={kv_len}")
    assert not recorder.calls


def test_left_padding_and_cache_tail_masks():
    recorder = _setup()
    for q_len, kv_len, starts, ends in ((12, 12, [0, 5, 11], [12, 12, 12]),     # left-padded prompts
                                       (1, 40, [3, 0, 7], [23, 40, 31]),        # static cache, decode
                                       (4, 32, [2, 0, 0], [20, 9, 32])):        # static cache, chunk
        query, key, value = _qkv(3, q_len, kv_len, kv_len)
        allowed = _allowed(starts, ends, q_len, kv_len)
        expected = dense_attention(query, key, value, allowed, SCALE)
        bool_mask = allowed[:, None]
        float_mask = torch.zeros(bool_mask.shape).masked_fill(~bool_mask, torch.finfo(torch.float32).min)
        for mask in (bool_mask, float_mask):
            out, _ = hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
            _check_rows(out, expected, allowed, f"mask {mask.dtype} T={q_len} S={kv_len}")
    padding = torch.ones((2, 10), dtype=torch.long)
    padding[1, :4] = 0
    query, key, value = _qkv(2, 10, 10, 3)
    out, _ = hf.attention_forward(Module(), query, key, value, padding, scaling=SCALE)
    allowed = _allowed([0, 4], [10, 10], 10, 10)
    _check_rows(out, dense_attention(query, key, value, allowed, SCALE), allowed, "2-D padding mask")
    assert not recorder.calls


def test_other_layers_and_masks_go_to_sdpa():
    recorder = _setup()
    query, key, value = _qkv(1, 6, 6, 4)
    scattered = torch.rand((1, 1, 6, 6), generator=torch.Generator().manual_seed(5)) > 0.5
    scattered[..., 0] = True
    handed = [
        ((query, key, value, scattered), {"scaling": SCALE}),                       # not causal with a key range
        ((query, key, value, None), {"scaling": SCALE, "sliding_window": 1024}),
        ((query, key, value, None), {"scaling": SCALE, "softcap": 50.0}),
        ((query.float(), key.float(), value.float(), None), {"scaling": SCALE}),
        (_qkv(1, 6, 6, 4, head_dim=256) + (None,), {"scaling": SCALE}),              # Gemma 4's sliding layers
        ((query, key, value, None), {"scaling": SCALE, "is_causal": False}),
    ]
    for args, kwargs in handed:
        assert hf.attention_forward(Module(), *args, **kwargs) == ("sdpa", None)
    assert len(recorder.calls) == len(handed)
    assert recorder.calls[1][2]["sliding_window"] == 1024          # arguments passed on unchanged
    trainable = query.clone().requires_grad_()
    assert hf.attention_forward(Module(), trainable, key, value, None, scaling=SCALE) == ("sdpa", None)


class OldPagedCache:
    """update() as in transformers 5.0-5.1x: [1, Hkv, T, D] in, [total_k, Hkv, D] out."""

    def __init__(self, slots):
        self.keys = torch.zeros((slots, KV_HEADS, HEAD_DIM), dtype=torch.bfloat16)
        self.values = torch.zeros_like(self.keys)

    def store(self, key_states, value_states, read_index, write_index):
        self.keys[write_index] = key_states
        self.values[write_index] = value_states
        return self.keys[read_index], self.values[read_index]

    def update(self, key_states, value_states, layer_idx, read_index, write_index):
        return self.store(key_states[0].transpose(0, 1), value_states[0].transpose(0, 1), read_index, write_index)


class NewPagedCache(OldPagedCache):
    """update() of the versions with specialize_kwargs: [1, T, Hkv, D] in; per-group index lists."""

    def specialize_kwargs(self, layer_idx, num_tokens, kwargs):
        kwargs["read_index"], kwargs["write_index"] = kwargs["read_index"][0], kwargs["write_index"][0]
        return True

    def update(self, key_states, value_states, layer_idx, read_index, write_index):
        return self.store(key_states[0], value_states[0], read_index, write_index)


def _paged_call(cache_type, seed):
    """Three requests (past, new): a prefill chunk with context, two decodes; shuffled slots."""
    requests = [(9, 6), (20, 1), (3, 1)]
    generator = torch.Generator().manual_seed(seed)
    slots = torch.randperm(64, generator=generator)
    cache = cache_type(64)
    read, write, used, past_keys = [], [], 0, []
    for past, new in requests:
        own = slots[used:used + past + new]
        used += past + new
        past_k = torch.randn((past, KV_HEADS, HEAD_DIM), generator=generator).bfloat16()
        past_v = torch.randn((past, KV_HEADS, HEAD_DIM), generator=generator).bfloat16()
        cache.keys[own[:past]], cache.values[own[:past]] = past_k, past_v
        past_keys.append((past_k, past_v))
        read.append(own)
        write.append(own[past:])
    total_q = sum(new for _, new in requests)
    query = torch.randn((1, total_q, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
    key = torch.randn((1, total_q, KV_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
    value = torch.randn((1, total_q, KV_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
    cu_q = torch.tensor([0, 6, 7, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 15, 36, 40], dtype=torch.int32)
    read_index, write_index = torch.cat(read), torch.cat(write)
    if cache_type is NewPagedCache:
        read_index, write_index = [read_index], [write_index]
    kwargs = {"cache": cache, "cu_seq_lens_q": cu_q, "cu_seq_lens_k": {"full_attention": cu_k},
              "max_seqlen_q": 6, "max_seqlen_k": {"full_attention": 21}, "read_index": read_index,
              "write_index": write_index, "scaling": SCALE}
    expected = []
    for s, ((past, new), (past_k, past_v)) in enumerate(zip(requests, past_keys)):
        rows = slice(int(cu_q[s]), int(cu_q[s + 1]))
        keys = torch.cat([past_k, key[0, :, rows].transpose(0, 1)])[None].transpose(1, 2)
        values = torch.cat([past_v, value[0, :, rows].transpose(0, 1)])[None].transpose(1, 2)
        allowed = _allowed([0], [past + new], new, past + new)
        expected.append(dense_attention(query[:, :, rows], keys, values, allowed, SCALE)[0])
    return (query, key, value), kwargs, torch.cat(expected)


def test_continuous_batching_calls():
    recorder = _setup()
    for cache_type in (OldPagedCache, NewPagedCache):
        (query, key, value), kwargs, expected = _paged_call(cache_type, 6)
        out, _ = hf.attention_forward(Module(), query, key, value, None, **kwargs)
        assert tuple(out.shape) == (1, query.shape[2], Q_HEADS, HEAD_DIM)
        assert_close_bf16(out[0], expected, cache_type.__name__)
        written = kwargs["cache"].keys[kwargs["write_index"] if cache_type is OldPagedCache
                                       else kwargs["write_index"][0]]
        assert torch.equal(written, key[0].transpose(0, 1)), "new keys not in the paged cache"
    (query, key, value), kwargs, _ = _paged_call(OldPagedCache, 7)
    assert hf.attention_forward(Module(), query, key, value, None, sliding_window=512, **kwargs) == ("sdpa", None)
    assert recorder.calls[-1][0] is True                          # handed to the paged SDPA path


def _metadata(problem):
    slots = []
    for s, (q_len, length) in enumerate(problem.seqs):
        for j in range(length - q_len, length):
            slots.append(int(problem.block_table[s, j // problem.block_size]) * problem.block_size +
                         j % problem.block_size)
    return serving.AttentionMetadata(problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table,
                                     torch.tensor(slots, dtype=torch.int64),
                                     max(q for q, _ in problem.seqs), max(k for _, k in problem.seqs))


def test_serving_backend_sketch():
    seqs = [(7, 40), (1, 33), (1, 18), (12, 12)]
    for kv_cache_dtype in ("bf16", "e4m3"):
        problem = Problem(seqs, layout="vllm", seed=8)
        metadata = _metadata(problem)
        new_rows = [i for s, (q_len, length) in enumerate(seqs) for i in range(q_len)]
        generator = torch.Generator().manual_seed(9)
        key = torch.randn((len(new_rows), KV_HEADS, HEAD_DIM), generator=generator).bfloat16()
        value = torch.randn((len(new_rows), KV_HEADS, HEAD_DIM), generator=generator).bfloat16()
        backend = serving.WideattnBackend(Q_HEADS, KV_HEADS, HEAD_DIM, problem.scale, kv_cache_dtype)
        kv_cache, scales = problem.kv_cache, (None, None)
        if kv_cache_dtype == "e4m3":
            scales = (wideattn.compute_scale(problem.k_cache.reshape(-1, KV_HEADS, HEAD_DIM)),
                      wideattn.compute_scale(problem.v_cache.reshape(-1, KV_HEADS, HEAD_DIM)))
            kv_cache = torch.stack([wideattn.quantize(problem.kv_cache[i].reshape(-1, KV_HEADS, HEAD_DIM),
                                                      scales[i]).reshape(problem.k_cache.shape) for i in (0, 1)])
        out = backend.forward(problem.q.reshape(problem.q.shape[0], -1), key, value, kv_cache, metadata,
                              k_scale=scales[0], v_scale=scales[1])
        flat = [kv_cache[i].reshape(-1, KV_HEADS, HEAD_DIM) for i in (0, 1)]
        if kv_cache_dtype == "e4m3":
            k_deq = (reference.e4m3_decode(kv_cache[0]) * scales[0].double()).reshape(problem.k_cache.shape)
            v_deq = (reference.e4m3_decode(kv_cache[1]) * scales[1].double()).reshape(problem.v_cache.shape)
            expected_codes, _ = reference.quantize(key, scales[0])
            assert torch.equal(reference.e4m3_codes(flat[0])[metadata.slot_mapping], expected_codes)
        else:
            k_deq, v_deq = problem.k_cache, problem.v_cache
            assert torch.equal(flat[0][metadata.slot_mapping], key) and torch.equal(flat[1][metadata.slot_mapping],
                                                                                   value)
        expected, _ = problem.expected(k_deq, v_deq)
        assert_close_bf16(out, expected, f"serving backend ({kv_cache_dtype})")


class HintRecorder:
    """Wraps the op: records each call's (max_seqlen_q, max_seqlen_k, num_splits), the arguments
    before the last (flags), then runs it."""

    def __init__(self):
        self.hints = []
        self.op = ops._prefill_op

    def __call__(self, *args):
        self.hints.append(tuple(args[-4:-1]))
        return self.op(*args)

    def __enter__(self):
        ops._prefill_op = self
        return self

    def __exit__(self, *exc):
        ops._prefill_op = self.op


def test_calls_pass_host_length_hints():
    _setup()
    query, key, value = _qkv(2, 5, 21, 10)
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
    assert recorder.hints == [(5, 21, 0)], recorder.hints
    (query, key, value), kwargs, _ = _paged_call(OldPagedCache, 11)
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), query, key, value, None, **kwargs)
    assert recorder.hints == [(6, 21, 0)], recorder.hints
    kwargs["max_seqlen_q"] = torch.tensor(6)                       # not a host int: unknown
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), query, key, value, None, **kwargs)
    assert recorder.hints == [(0, 21, 0)], recorder.hints
    seqs = [(7, 40), (1, 33)]
    problem = Problem(seqs, layout="vllm", seed=12)
    metadata = _metadata(problem)
    new = sum(q for q, _ in seqs)
    states = torch.zeros((new, KV_HEADS, HEAD_DIM), dtype=torch.bfloat16)
    backend = serving.WideattnBackend(Q_HEADS, KV_HEADS, HEAD_DIM, problem.scale, num_splits=7)
    with HintRecorder() as recorder:
        backend.forward(problem.q, states, states, problem.kv_cache, metadata)
    assert recorder.hints == [(7, 40, 7)], recorder.hints


if __name__ == "__main__":
    harness.run(dict(globals()))
