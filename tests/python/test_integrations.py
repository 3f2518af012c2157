"""test_integrations.py - the transformers integration's mapping and the serving backend sketch on
the CPU, through the ops' CPU (reference) implementation (transformers itself is not installed
here: its SDPA function is replaced by a recorder or a naive masked attention, and its paged
cache by stand-ins with the update() contract of transformers' PagedAttentionCache; the GPU test
tests/gpu/test_transformers_gemma4.py runs the real thing), and the host-side length hints and
split count each path hands the op.

usage: python3 test_integrations.py   (PYTHONPATH = build/python, WIDEATTN_BUNDLE = build/bundle)
"""

import importlib.abc
import math
import os
import sys

import harness

harness.require_torch()
import torch  # noqa: E402

import wideattn  # noqa: E402
import wideattn.transformers as hf  # noqa: E402
from wideattn import ops, reference, serving  # noqa: E402
from paged_problem import GROUP, HEAD_DIM, PrefillOps, Problem, assert_close_bf16, dense_attention  # noqa: E402

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

    def __call__(self):
        def sdpa(module, query, key, value, attention_mask, **kwargs):
            self.calls.append((query.shape, attention_mask, kwargs))
            return "sdpa", None
        return sdpa


class MaskedAttention(Recorder):
    """Stands in for transformers' SDPA function by computing the attention it would: the
    additive (or boolean) mask as given, float64."""

    def __call__(self):
        def sdpa(module, query, key, value, attention_mask, **kwargs):
            self.calls.append((query.shape, attention_mask, kwargs))
            allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
            batch = query.shape[0]
            return dense_attention(query, key, value, allowed[:, 0].expand(batch, -1, -1), kwargs["scaling"]), None
        return sdpa


def _setup(recorder_type=Recorder):
    hf.CPU_REFERENCE = True
    recorder = recorder_type()
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
    """No mask, as transformers' SDPA function reads it (integrations/sdpa_attention.py): causal
    over all keys for T == 1 or T == S; for T > 1 and S > T (sdpa_mask skips the mask of an
    empty static cache's prefill since transformers 5.14) causal over the first T keys."""
    recorder = _setup()
    for q_len, kv_len, keys in ((9, 9, 9), (1, 37, 37), (5, 21, 5)):
        query, key, value = _qkv(2, q_len, kv_len, q_len)
        out, weights = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
        allowed = _allowed([0, 0], [keys, keys], q_len, kv_len)
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
    assert recorder.calls[0][1] is scattered
    trainable = query.clone().requires_grad_()
    assert hf.attention_forward(Module(), trainable, key, value, None, scaling=SCALE) == ("sdpa", None)


class PagedCache:
    """update() as transformers' PagedAttentionCache has it since 4.57 (generation/
    continuous_batching/cache.py; checked up to 5.16.0.dev0, commit 3cd1a2307acd): layers are
    grouped by attention type, layer_idx -> (group, index in group); one cache tensor
    [slots, Hkv, D] per index in a group, shared by the groups; read_index / write_index are
    lists with one index tensor per group; key_states [1, Hkv, T, D] in, rows [K, Hkv, D] out; an
    empty read index writes only and returns the new states. (The real sliding groups read
    before they write, which gives the same rows when no slot is reused, as here.)"""

    def __init__(self, slots, groups):
        self.layer_index_to_group_indices = {layer: (group, 0) for layer, group in enumerate(groups)}
        self.keys = torch.zeros((slots, KV_HEADS, HEAD_DIM), dtype=torch.bfloat16)
        self.values = torch.zeros_like(self.keys)

    def update(self, key_states, value_states, layer_idx, read_index, write_index):
        group, _ = self.layer_index_to_group_indices[layer_idx]
        key_states, value_states = key_states.transpose(1, 2).squeeze(0), value_states.transpose(1, 2).squeeze(0)
        self.keys.index_copy_(0, write_index[group], key_states)
        self.values.index_copy_(0, write_index[group], value_states)
        if read_index[group].numel() == 0:
            return key_states, value_states
        return self.keys.index_select(0, read_index[group]), self.values.index_select(0, read_index[group])


class HeadMajorPagedCache:
    """update() of the 4.5x caches (cache.py of mid-2025): one index tensor, keys returned
    head-major [1, Hkv, K, D]."""

    def __init__(self, slots, groups):
        self.keys = torch.zeros((KV_HEADS, slots, HEAD_DIM), dtype=torch.bfloat16)
        self.values = torch.zeros_like(self.keys)

    def update(self, key_states, value_states, layer_idx, read_index, write_index, **kwargs):
        self.keys[:, write_index], self.values[:, write_index] = key_states[0], value_states[0]
        return self.keys[None, :, read_index], self.values[None, :, read_index]


REQUESTS = [(9, 6), (20, 1), (3, 1)]       # (past, new) per request: a prefill chunk with context, two decodes
SLIDING_WINDOW = 8
PADDED_Q_ROWS = 2                          # CUDA-graph padding: rows of no sequence, a zero-length sequence
PADDED_K_ROWS = 3                          # and key rows past the last sequence's


def _layer_keys(window, requests=REQUESTS):
    """Keys per request of a layer: all of them, or the sliding window's (transformers'
    get_seqlens_k: new + min(past, window - 1))."""
    return [new + (past if window is None else min(past, window - 1)) for past, new in requests]


class PagedStep:
    """One continuous-batching step over a full layer (0) and a sliding layer (1): the paged cache
    stand-in with every request's past K/V in shuffled slots, the call's new states, the kwargs
    transformers passes (padded as under CUDA graphs when `padded`), and the expected outputs.
    Requests without a past (fresh prefills only) get empty read indices, as transformers passes
    them for its write-only update."""

    def __init__(self, cache_type, seed, padded=False, requests=REQUESTS):
        generator = torch.Generator().manual_seed(seed)
        self.requests = requests
        total_q = sum(new for _, new in requests)
        rows = total_q + (PADDED_Q_ROWS if padded else 0)
        self.query = torch.randn((1, rows, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
        self.key = torch.randn((1, rows, KV_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
        self.value = torch.randn((1, rows, KV_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
        slots = torch.randperm(128, generator=generator)
        self.cache = cache_type(128 + rows, groups=[0, 1])
        self.past = []
        read = {None: [], SLIDING_WINDOW: []}
        write, used = [], 0
        for past, new in requests:
            own = slots[used:used + past + new]
            used += past + new
            past_k, past_v = (torch.randn((past, KV_HEADS, HEAD_DIM), generator=generator).bfloat16() for _ in "kv")
            self._store(own[:past], past_k, past_v)
            self.past.append((past_k, past_v))
            write.append(own[past:])
            read[None].append(own)
            read[SLIDING_WINDOW].append(own[past - min(past, SLIDING_WINDOW - 1):])
        # Padding as transformers pads under CUDA graphs: the padded rows write to slots nobody
        # reads, the read indices grow by slots of the zeroed read trash.
        trash = torch.arange(128, 128 + rows - total_q)
        self.new_slots = torch.cat(write)
        write_index = torch.cat(write + [trash])
        read_trash = torch.full((PADDED_K_ROWS if padded else 0,), 128 + rows - 1)
        self.read_index = {window: torch.cat(parts + [read_trash]) for window, parts in read.items()}
        if not any(past for past, _ in requests):
            self.read_index = {window: torch.zeros(0, dtype=torch.long) for window in read}
        q_lens = [new for _, new in requests] + ([0] if padded else [])
        cu_q = torch.tensor([0] + [sum(q_lens[:i + 1]) for i in range(len(q_lens))], dtype=torch.int32)
        cu_k = {}
        for layer_type, window in ((hf.FULL_ATTENTION, None), (hf.SLIDING_ATTENTION, SLIDING_WINDOW)):
            lens = _layer_keys(window, requests) + ([0] if padded else [])
            cu_k[layer_type] = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32)
        if cache_type is HeadMajorPagedCache:
            read_index, write_index = self.read_index[None], write_index
        else:
            read_index, write_index = [self.read_index[None], self.read_index[SLIDING_WINDOW]], [write_index] * 2
        self.kwargs = {"cache": self.cache, "cu_seq_lens_q": cu_q, "cu_seq_lens_k": cu_k, "max_seqlen_q": max(q_lens),
                       "max_seqlen_k": {name: int((c[1:] - c[:-1]).max()) for name, c in cu_k.items()},
                       "read_index": read_index, "write_index": write_index, "scaling": SCALE,
                       "position_ids": torch.zeros((1, rows), dtype=torch.long), "logits_indices": cu_q[1:] - 1}

    def _store(self, slots, keys, values):
        if isinstance(self.cache, HeadMajorPagedCache):
            self.cache.keys[:, slots], self.cache.values[:, slots] = keys.transpose(0, 1), values.transpose(0, 1)
        else:
            self.cache.keys[slots], self.cache.values[slots] = keys, values

    def expected(self, window):
        """[total_q, Hq, D] float64 of every request: its past and new keys, causal, the window's."""
        out, begin = [], 0
        for (past, new), (past_k, past_v) in zip(self.requests, self.past):
            rows = slice(begin, begin + new)
            begin += new
            keys = torch.cat([past_k, self.key[0, :, rows].transpose(0, 1)])[None].transpose(1, 2)
            values = torch.cat([past_v, self.value[0, :, rows].transpose(0, 1)])[None].transpose(1, 2)
            allowed = _allowed([0], [past + new], new, past + new)
            if window is not None:
                positions = torch.arange(past + new)
                allowed = allowed & ((past + torch.arange(new))[:, None] - positions[None, :] < window)[None]
            out.append(dense_attention(self.query[:, :, rows], keys, values, allowed, SCALE)[0])
        return torch.cat(out)


class SlidingModule(Module):
    layer_idx = 1


def test_continuous_batching_calls():
    """A full layer on wideattn (rows from update(), varlen), its new keys in the paged cache."""
    recorder = _setup()
    for cache_type, padded in ((PagedCache, False), (PagedCache, True), (HeadMajorPagedCache, False)):
        step = PagedStep(cache_type, 6, padded)
        out, _ = hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
        total_q = sum(new for _, new in REQUESTS)
        assert tuple(out.shape) == (1, step.query.shape[2], Q_HEADS, HEAD_DIM)
        assert_close_bf16(out[0, :total_q], step.expected(None), f"{cache_type.__name__} padded={padded}")
        keys = step.cache.keys if cache_type is PagedCache else step.cache.keys.transpose(0, 1)
        assert torch.equal(keys[step.new_slots], step.key[0, :, :total_q].transpose(0, 1)), \
            "new keys not in the paged cache"
    step = PagedStep(PagedCache, 10, requests=[(0, 5), (0, 9)])       # write-only update: the new states back
    out, _ = hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
    assert_close_bf16(out[0], step.expected(None), "fresh prefills (write-only update)")
    assert torch.equal(step.cache.keys[step.new_slots], step.key[0].transpose(0, 1))
    assert not recorder.calls


def test_continuous_batching_sliding_layer_gets_a_packed_mask():
    """A layer wideattn does not serve (Gemma 4's sliding layers) runs on SDPA over the rows
    update() returns, with the packed causal sliding-window mask transformers builds only for
    paged|sdpa; padded rows see no key."""
    for padded in (False, True):
        recorder = _setup(MaskedAttention)
        step = PagedStep(PagedCache, 7, padded)
        out, _ = hf.attention_forward(SlidingModule(), step.query, step.key, step.value, None,
                                      sliding_window=SLIDING_WINDOW, **step.kwargs)
        (_, mask, kwargs), = recorder.calls
        total_q = sum(new for _, new in REQUESTS)
        padded_keys = PADDED_K_ROWS if padded else 0
        assert tuple(mask.shape) == (1, 1, step.query.shape[2], sum(_layer_keys(SLIDING_WINDOW)) + padded_keys)
        assert kwargs["sliding_window"] == SLIDING_WINDOW and "cache" not in kwargs
        assert_close_bf16(out[0, :total_q], step.expected(SLIDING_WINDOW), f"sliding layer padded={padded}")
        lowest = torch.finfo(mask.dtype).min
        assert (mask[0, 0, total_q:] == lowest).all() and (out[0, total_q:] == 0).all(), "padded rows saw keys"
        assert (mask[0, 0, :, mask.shape[-1] - padded_keys:] == lowest).all(), "padded keys are seen"
        assert hf.calls["sdpa"] > 0
    recorder = _setup(MaskedAttention)
    step = PagedStep(PagedCache, 8)
    step.cache.keys, step.cache.values = step.cache.keys.float(), step.cache.values.float()
    out, _ = hf.attention_forward(Module(), step.query.float(), step.key.float(), step.value.float(), None,
                                  **step.kwargs)
    assert_close_bf16(out[0], step.expected(None), "float32 full layer on SDPA")


def test_block_table_calls_are_refused():
    _setup()
    step = PagedStep(PagedCache, 9)
    harness.expect_raises(NotImplementedError, ["block_table"], hf.attention_forward, Module(), step.query,
                          step.key, step.value, None, block_table=torch.zeros((1, 4), dtype=torch.int32),
                          **step.kwargs)


def _metadata(problem):
    slots = []
    for s, (q_len, length) in enumerate(problem.seqs):
        for j in range(length - q_len, length):
            slots.append(int(problem.block_table[s, j // problem.block_size]) * problem.block_size +
                         j % problem.block_size)
    return serving.AttentionMetadata(problem.cu_seqlens_q, problem.seq_lens_k, problem.block_table,
                                     torch.tensor(slots, dtype=torch.int64),
                                     max(q for q, _ in problem.seqs), max(k for _, k in problem.seqs))


class _BlockTransformers(importlib.abc.MetaPathFinder):
    """Makes `import transformers` fail as on a machine without it."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "transformers" or fullname.startswith("transformers."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked by the test)", name=fullname)
        return None


def test_register_without_transformers_names_it():
    """register() where transformers cannot be imported: an ImportError saying what needs it,
    the failed import as its cause (it used to be the bare ModuleNotFoundError)."""
    saved = {name: module for name, module in sys.modules.items()
             if name == "transformers" or name.startswith("transformers.")}
    for name in saved:
        del sys.modules[name]
    blocker = _BlockTransformers()
    sys.meta_path.insert(0, blocker)
    try:
        error = harness.expect_raises(ImportError, ["wideattn.transformers needs transformers"], hf.register)
        assert isinstance(error.__cause__, ModuleNotFoundError), repr(error.__cause__)
        assert error.__cause__.name == "transformers", error.__cause__.name
    finally:
        sys.meta_path.remove(blocker)
        sys.modules.update(saved)


def test_serving_backend_checks_its_shape():
    """The constructor refuses a cache dtype it does not know, heads that do not form whole groups
    and a head_dim or group the bundle has no kernel for, naming the argument and value (they used
    to fail at the first call)."""
    refused = [
        ((12, 8, HEAD_DIM), "bf16", ["num_q_heads=12 is not a multiple of num_kv_heads=8"]),
        ((Q_HEADS, KV_HEADS, 256), "bf16", ["head_dim=256", "bf16 cache", f"take head_dim {HEAD_DIM}"]),
        ((Q_HEADS, KV_HEADS, 128), "e4m3", ["head_dim=128", "e4m3 cache", f"take head_dim {HEAD_DIM}"]),
        ((2 * KV_HEADS, KV_HEADS, HEAD_DIM), "bf16", ["= group 2", f"take group {GROUP}"]),
        ((Q_HEADS, 0, HEAD_DIM), "bf16", ["num_kv_heads=0 is not a positive integer"]),
        ((Q_HEADS, KV_HEADS, 512.0), "bf16", ["head_dim=512.0 is not a positive integer"]),
        # A bare ValueError up to 5f2c5be.
        ((Q_HEADS, KV_HEADS, HEAD_DIM), "fp8", ["kv_cache_dtype='fp8': expected 'bf16' or 'e4m3'"]),
    ]
    for (q_heads, kv_heads, head_dim), kv_cache_dtype, fragments in refused:
        harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.serving.WideattnBackend"] + fragments,
                              serving.WideattnBackend, q_heads, kv_heads, head_dim, SCALE, kv_cache_dtype)
    for kv_cache_dtype in ("bf16", "e4m3"):
        serving.WideattnBackend(Q_HEADS, KV_HEADS, HEAD_DIM, SCALE, kv_cache_dtype)
    harness.expect_raises(wideattn.InvalidArgumentError,
                          ["wideattn.serving.WideattnBackend", "v_transposed=True needs kv_cache_dtype='e4m3'"],
                          serving.WideattnBackend, Q_HEADS, KV_HEADS, HEAD_DIM, SCALE, "bf16", None, True)
    harness.expect_raises(wideattn.InvalidArgumentError, ["wideattn.serving.WideattnBackend", "v_transposed=1"],
                          serving.WideattnBackend, Q_HEADS, KV_HEADS, HEAD_DIM, SCALE, "e4m3", None, 1)


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
        before = kv_cache.clone()
        again = backend.attend(problem.q, kv_cache, metadata, k_scale=scales[0], v_scale=scales[1])
        assert torch.equal(again, out) and torch.equal(before, kv_cache), "attend() is not forward() less store()"
        if kv_cache_dtype == "e4m3" and any("v_transposed" in k.features for k in wideattn.kernels()):
            # The same cache tensor with its V half in the transposed layout (the FP8 P V kernels'):
            # the same codes moved, the same result.
            transposed = kv_cache.clone()
            transposed[1].view(-1).copy_(reference.transposed_v_cache(kv_cache[1]).view(-1))
            backend_t = serving.WideattnBackend(Q_HEADS, KV_HEADS, HEAD_DIM, problem.scale, kv_cache_dtype,
                                                v_transposed=True)
            stored = transposed.clone()
            out_t = backend_t.forward(problem.q.reshape(problem.q.shape[0], -1), key, value, stored, metadata,
                                      k_scale=scales[0], v_scale=scales[1])
            assert torch.equal(stored, transposed), "store() with v_transposed wrote other codes"
            assert torch.equal(out_t, out), "v_transposed changed the result"
            # A V half whose blocks are not contiguous cannot be viewed as the transposed layout.
            padded = torch.zeros(kv_cache.shape[:-1] + (2 * HEAD_DIM,), dtype=kv_cache.dtype)[..., :HEAD_DIM]
            harness.expect_raises(wideattn.InvalidArgumentError,
                                  ["wideattn.serving.WideattnBackend", "kv_cache[1] has strides",
                                   "each block of the V half must be contiguous"],
                                  backend_t.attend, problem.q, padded, metadata, k_scale=scales[0],
                                  v_scale=scales[1])


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
        self.patch = PrefillOps(self).__enter__()
        return self

    def __exit__(self, *exc):
        self.patch.__exit__(*exc)


def test_calls_pass_host_length_hints():
    _setup()
    query, key, value = _qkv(2, 5, 21, 10)
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
    assert recorder.hints == [(5, 21, 0)], recorder.hints
    step = PagedStep(PagedCache, 11)
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
    assert recorder.hints == [(6, 21, 0)], recorder.hints
    step = PagedStep(PagedCache, 11)
    step.kwargs["max_seqlen_q"] = torch.tensor(6)                  # not a host int: unknown
    with HintRecorder() as recorder:
        hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
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


def test_global_layers_of_a_step_share_one_metadata():
    # A forward step's global layers (same mask tensor, or no mask, same shapes) get the same
    # metadata tensors, built once, so the op's plan cache runs one plan for all of them; the next
    # step (a new mask tensor, or an in-place change) builds its own. Each layer's output is right.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    q_len, kv_len, starts, ends = 1, 40, [3, 0, 7], [23, 40, 31]
    allowed = _allowed(starts, ends, q_len, kv_len)
    mask = allowed[:, None]
    seen = []
    real_op = ops._prefill_op

    def recording_op(*args):
        seen.append(tuple(a.data_ptr() for a in args[3:6]))
        return real_op(*args)

    patch = PrefillOps(recording_op).__enter__()
    try:
        builds = hf.step_builds["count"]
        for layer in range(4):
            query, key, value = _qkv(3, q_len, kv_len, 100 + layer)
            out, _ = hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
            _check_rows(out, dense_attention(query, key, value, allowed, SCALE), allowed, f"layer {layer}")
        assert hf.step_builds["count"] == builds + 1, hf.step_builds
        assert len(set(seen)) == 1, seen   # one set of metadata tensors for the step's layers
        next_mask = mask.clone()
        hf.attention_forward(Module(), *_qkv(3, q_len, kv_len, 7), next_mask, scaling=SCALE)
        assert hf.step_builds["count"] == builds + 2
        next_mask[1, 0, 0, 5] = False     # changed in place: read again
        hf.attention_forward(Module(), *_qkv(3, q_len, kv_len, 8), next_mask, scaling=SCALE)
        assert hf.step_builds["count"] == builds + 3
        for _ in range(3):                 # no mask: shared by shape
            hf.attention_forward(Module(), *_qkv(2, 5, 21, 9), None, scaling=SCALE)
        assert hf.step_builds["count"] == builds + 4
        # Continuous batching: the served layers of one step (the same metadata tensors) too.
        step = PagedStep(PagedCache, 21)
        first, _ = hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
        for _ in range(2):
            again, _ = hf.attention_forward(Module(), step.query, step.key, step.value, None, **step.kwargs)
            assert torch.equal(again, first)
        assert hf.step_builds["count"] == builds + 5
    finally:
        patch.__exit__()


def _causal(batch_idx, head_idx, q_idx, kv_idx):
    """Stands in for transformers' causal_mask_function (build_mask compares it by identity)."""
    return kv_idx <= q_idx


def _sdpa_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=_causal, attention_mask=None,
               local_size=None, allow_is_causal_skip=True, device="cpu", **kwargs):
    """Stands in for transformers' sdpa_mask (masking_utils, 5.14+ arguments): the bool mask
    [B, 1, T, S] of causal attention at the offsets, within local_size keys when given, and of
    the 2-D padding mask's keys; mask functions other than _causal allow every key of the causal
    ones but the first (an overlay of some other form)."""
    rows = torch.arange(q_length)[:, None] + q_offset
    cols = torch.arange(kv_length)[None, :] + kv_offset
    allowed = cols <= rows
    if mask_function is not _causal:
        allowed = allowed & (cols > 0)
    if local_size is not None:
        allowed = allowed & (cols > rows - local_size)
    allowed = allowed[None].expand(batch_size, -1, -1)
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, kv_offset:kv_offset + kv_length].bool()
    return allowed[:, None]


class MaskSource:
    """build_mask over the stand-ins above (transformers is not installed here), with the counters
    of masks read and verified and the SDPA recorder; restores the module's state on exit."""

    def __enter__(self):
        self.recorder = _setup()
        self.saved = dict(hf._mask_source)
        hf._mask_source.update(sdpa_mask=_sdpa_mask, causal=_causal)
        hf._step["entry"] = hf._decode_step["entry"] = None
        self.reads, self.verified = dict(hf.mask_reads), hf.verifications["count"]
        return self

    def __exit__(self, *exc):
        hf._mask_source.update(self.saved)
        hf.set_mask_check(hf.MASK_CHECK_AUTO)
        hf._step["entry"] = hf._decode_step["entry"] = None

    def counts(self):
        """(masks build_mask derived, build_mask verified, host verifications in all) since entry."""
        return (hf.mask_reads["derived"] - self.reads["derived"], hf.mask_reads["verified"] - self.reads["verified"],
                hf.verifications["count"] - self.verified)


def _step_layers(mask, batch, q_len, kv_len, allowed, layers=3, seed=200):
    """Runs `layers` served layers of one step with `mask`, checking each output against the
    naive attention of `allowed`."""
    for layer in range(layers):
        query, key, value = _qkv(batch, q_len, kv_len, seed + layer)
        out, _ = hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
        _check_rows(out, dense_attention(query, key, value, allowed, SCALE), allowed, f"layer {layer}")


def test_masks_of_causal_form_by_construction_are_never_verified():
    # build_mask's mask of the plain causal function, no padding, host offsets at the end of the
    # keys (a chunk of a prefill, a decode step over a cache): read on the device, not verified,
    # neither where it is built nor by the step's layers.
    with MaskSource() as source:
        for q_len, kv_len in ((4, 19), (1, 33), (6, 6)):
            mask = hf.build_mask(batch_size=2, q_length=q_len, kv_length=kv_len, q_offset=kv_len - q_len, kv_offset=0,
                                 mask_function=_causal, attention_mask=None, device="cpu")
            assert torch.equal(mask, _sdpa_mask(2, q_len, kv_len, kv_len - q_len)), "build_mask changed the mask"
            _step_layers(mask, 2, q_len, kv_len, _allowed([0, 0], [kv_len, kv_len], q_len, kv_len))
        assert source.counts() == (3, 0, 0), source.counts()
        assert not source.recorder.calls


def test_masks_built_with_padding_are_verified_once_where_they_are_built():
    # A padding mask (left padding; a static cache's tail): one host verification in build_mask,
    # none in the layers. A padding with a hole: verified there too, and the layers go to SDPA
    # without reading it again.
    with MaskSource() as source:
        padding = torch.ones((3, 12), dtype=torch.long)
        padding[1, :5] = 0
        padding[2, 9:] = 0                        # the unused tail of a static cache
        mask = hf.build_mask(batch_size=3, q_length=1, kv_length=12, q_offset=8, kv_offset=0, mask_function=_causal,
                             attention_mask=padding, device="cpu")
        _step_layers(mask, 3, 1, 12, _allowed([0, 5, 0], [9, 9, 9], 1, 12))
        assert source.counts() == (0, 1, 1), source.counts()
        holed = torch.ones((1, 10), dtype=torch.long)
        holed[0, 4] = 0
        mask = hf.build_mask(batch_size=1, q_length=1, kv_length=10, q_offset=9, kv_offset=0, mask_function=_causal,
                             attention_mask=holed, device="cpu")
        assert getattr(mask, hf.READING_ATTRIBUTE)[1] is None
        for layer in range(3):
            assert hf.attention_forward(Module(), *_qkv(1, 1, 10, layer), mask, scaling=SCALE) == ("sdpa", None)
        assert source.counts() == (0, 2, 2), source.counts()


def test_masks_of_other_origins_are_verified_once_per_step():
    # Offsets on the device (a StaticCache's length) or outside the keys: verified in build_mask.
    # A mask changed in place after build_mask read it, or passed in 4-D by the caller: verified
    # at the step's first served layer. Masks of other mask functions or a local window (layers
    # wideattn does not serve): nothing read in build_mask.
    with MaskSource() as source:
        mask = hf.build_mask(batch_size=1, q_length=1, kv_length=16, q_offset=torch.tensor(7), kv_offset=0,
                             mask_function=_causal, attention_mask=None, device="cpu")
        _step_layers(mask, 1, 1, 16, _allowed([0], [8], 1, 16))
        assert source.counts() == (0, 1, 1), source.counts()
        over = hf.build_mask(batch_size=1, q_length=2, kv_length=8, q_offset=7, kv_offset=0, mask_function=_causal,
                             device="cpu")
        assert source.counts() == (0, 2, 2) and getattr(over, hf.READING_ATTRIBUTE)[1] is None, source.counts()
        mask = hf.build_mask(batch_size=2, q_length=1, kv_length=20, q_offset=19, kv_offset=0, mask_function=_causal,
                             device="cpu").clone()
        setattr(mask, hf.READING_ATTRIBUTE, (mask._version, getattr(mask, hf.READING_ATTRIBUTE, (0, None))[1]))
        mask[1, 0, 0, :3] = False                 # after build_mask read it: read and verified again
        _step_layers(mask, 2, 1, 20, _allowed([0, 3], [20, 20], 1, 20))
        assert source.counts() == (1, 2, 3), source.counts()
        passed = _allowed([2, 0], [20, 20], 1, 20)[:, None]
        _step_layers(passed, 2, 1, 20, _allowed([2, 0], [20, 20], 1, 20))
        assert source.counts() == (1, 2, 4), source.counts()
        for kwargs in ({"mask_function": _step_layers}, {"local_size": 4}):
            other = hf.build_mask(batch_size=1, q_length=1, kv_length=9, q_offset=8, kv_offset=0,
                                  **dict({"mask_function": _causal}, **kwargs))
            assert not hasattr(other, hf.READING_ATTRIBUTE), kwargs
        assert source.counts() == (1, 2, 4), source.counts()


def test_per_step_mode_and_debug_mode_verify_as_their_rules_say():
    # MASK_CHECK_PER_STEP (the earlier rule): build_mask attaches nothing, each step's first served
    # layer verifies. Debug mode: every served call verifies, attached reading or not, and no
    # metadata is shared.
    with MaskSource() as source:
        previous = hf.set_mask_check(hf.MASK_CHECK_PER_STEP)
        assert previous == hf.MASK_CHECK_AUTO
        allowed = _allowed([0, 0], [21, 21], 1, 21)
        for _ in range(2):
            mask = hf.build_mask(batch_size=2, q_length=1, kv_length=21, q_offset=20, kv_offset=0,
                                 mask_function=_causal, device="cpu")
            assert not hasattr(mask, hf.READING_ATTRIBUTE)
            _step_layers(mask, 2, 1, 21, allowed)
        assert source.counts() == (0, 0, 2), source.counts()
        hf.set_mask_check(hf.MASK_CHECK_AUTO)
        harness.expect_raises(ValueError, ["mode='always'"], hf.set_mask_check, "always")
        mask = hf.build_mask(batch_size=2, q_length=1, kv_length=21, q_offset=20, kv_offset=0, mask_function=_causal,
                             device="cpu")
        builds = hf.step_builds["count"]
        was = wideattn.set_debug(True)
        try:
            _step_layers(mask, 2, 1, 21, allowed, layers=3)
            assert not hasattr(hf.build_mask(batch_size=2, q_length=1, kv_length=21, q_offset=20, kv_offset=0,
                                             mask_function=_causal, device="cpu"), hf.READING_ATTRIBUTE)
        finally:
            wideattn.set_debug(was)
        assert source.counts() == (1, 0, 5), source.counts()
        assert hf.step_builds["count"] == builds + 3


def test_no_host_reads_on_the_step_path_of_known_masks():
    # The layers of steps with no mask or a mask of causal form by construction read no device
    # value on the host: bool(), int(), float() and item() of tensors are counted.
    reads = []
    saved = {name: getattr(torch.Tensor, name) for name in ("__bool__", "__int__", "__float__", "item", "tolist")}

    def counting(name):
        def read(self, *args):
            reads.append(name)
            return saved[name](self, *args)
        return read

    with MaskSource():
        masks = [None] + [hf.build_mask(batch_size=2, q_length=1, kv_length=kv_len, q_offset=kv_len - 1, kv_offset=0,
                                        mask_function=_causal, device="cpu") for kv_len in (30, 31)]
        inputs = [_qkv(2, 1, 30 + max(i - 1, 0), 300 + i) for i in range(len(masks))]
        # The op's CPU implementation (the reference) reads its metadata on the host, the CUDA one
        # does not: the op is replaced, so that only the integration's reads are counted.
        launched = []
        patch = PrefillOps(lambda *args: launched.append(args)).__enter__()
        for name in saved:
            setattr(torch.Tensor, name, counting(name))
        try:
            for mask, (query, key, value) in zip(masks, inputs):
                for _ in range(3):
                    hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
            assert len(launched) == 9 and not reads, (len(launched), reads)
            # The counting sees a verification: a 4-D mask the caller passed.
            hf.attention_forward(Module(), *inputs[1], _allowed([0, 0], [30, 30], 1, 30)[:, None], scaling=SCALE)
        finally:
            for name, function in saved.items():
                setattr(torch.Tensor, name, function)
            patch.__exit__()
    assert reads == ["__bool__"], reads


class OpRecorder:
    """Wraps the op: records each call's plan key (ops.plan_key with device 0 and stream 0, as the
    CUDA implementation would build it) and its layout, then runs it (or `op`, when given)."""

    def __init__(self, op=None):
        self.keys, self.layouts = [], []
        self.op = ops._prefill_op
        self.run = op or self.op

    def __call__(self, *args):
        q, k, v, cu, lens, table, k_layout, v_layout, scale, qs, ks, vs, out, lse, mq, mk, splits, flags = args
        self.keys.append(ops.plan_key(0, 0, q, k, cu, lens, table, k_layout, v_layout, scale, qs, ks, vs, out, lse,
                                      mq, mk, splits, flags))
        self.layouts.append(list(k_layout))
        return self.run(*args)

    def __enter__(self):
        self.patch = PrefillOps(self).__enter__()
        return self

    def __exit__(self, *exc):
        self.patch.__exit__(*exc)


def _grown(key, value, new):
    """A DynamicCache layer's update: torch.cat of the new K/V rows (new exact storage)."""
    return torch.cat([key, new[0]], dim=-2), torch.cat([value, new[1]], dim=-2)


def test_capacities_round_up_coarsely():
    # key_capacity: >= the keys, a power of two up to 4096, a multiple of 4096 above; at most 2x
    # the keys below 8192 and 1.5x above. row_capacity: >= the rows, at most 1/8 (or 255) more.
    for keys in list(range(1, 300)) + [511, 512, 513, 4095, 4096, 4097, 8191, 8192, 8193, 12289, 32768, 40000]:
        capacity = hf.key_capacity(keys)
        assert capacity >= keys and capacity % ops.TOKEN_ROW_PAGE == 0, (keys, capacity)
        assert capacity <= max(16, 2 * keys) and (keys < 8192 or capacity <= 1.5 * keys), (keys, capacity)
        assert hf.key_capacity(capacity) == capacity
    assert [hf.key_capacity(k) for k in (8193, 9000, 12288, 12289)] == [12288, 12288, 12288, 16384]
    for rows in list(range(1, 3000, 7)) + [32772, 32768 * 3 + 5, 1 << 20]:
        capacity = hf.row_capacity(rows)
        assert rows <= capacity < rows + max(256, rows // 8 + 1), (rows, capacity)
    # A decode step of 8192 + n keys at one row per step keeps both for a thousand steps.
    assert len({(hf.key_capacity(8193 + n), hf.row_capacity(4 * (8193 + n))) for n in range(1000)}) == 1


def _with_decode_reuse_on(body):
    """Runs body() with plan reuse across decode steps on: the default the decode rules belong to,
    also where $WIDEATTN_DECODE_REUSE=0 turned it off for the process."""
    previous = hf.set_decode_reuse(True)
    try:
        body()
    finally:
        hf.set_decode_reuse(previous)


class CountingHostWrites:
    """Within the block, the entries of every StepBuffers.write_host call in `writes`."""

    def __enter__(self):
        self.writes = []
        self.real = hf.StepBuffers.write_host
        real, writes = self.real, self.writes

        def counting(buffers, entries, fill):
            writes.append(entries)
            return real(buffers, entries, fill)

        hf.StepBuffers.write_host = counting
        return self.writes

    def __exit__(self, *exc):
        hf.StepBuffers.write_host = self.real


def _test_decode_steps_of_a_growing_cache_share_one_plan_key():
    # DynamicCache decode: K/V [B, Hkv, S, D] made anew by torch.cat at every step (so their head
    # stride S * D changes too). The decode path gives every step of a capacity bucket the same
    # plan key (metadata pointers, layout, hints), the outputs stay right, and the step's
    # metadata is built once per step, not per layer.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    generator = torch.Generator().manual_seed(31)
    batch, layers = 2, 2
    caches = [tuple(torch.randn((batch, KV_HEADS, 70, HEAD_DIM), generator=generator).bfloat16() for _ in range(2))
              for _ in range(layers)]
    builds, calls = hf.step_builds["count"], hf.decode_reuse["per_head_calls"]
    retries = hf.decode_reuse["exact_retries"]
    with OpRecorder() as recorder:
        for step in range(12):
            for layer in range(layers):
                new = [torch.randn((batch, KV_HEADS, 1, HEAD_DIM), generator=generator).bfloat16() for _ in range(2)]
                key, value = caches[layer] = _grown(*caches[layer], new)
                query = torch.randn((batch, 1, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
                out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
                kv_len = key.shape[2]
                allowed = _allowed([0] * batch, [kv_len] * batch, 1, kv_len)
                assert_close_bf16(out, dense_attention(query, key, value, allowed, SCALE), f"step {step} layer {layer}")
    assert hf.step_builds["count"] == builds + 12, hf.step_builds
    assert hf.decode_reuse["per_head_calls"] == calls + 12 * layers
    # One sequence pair per (batch row, KV head), one KV head, no head stride; rows rounded up
    # (the reference's validation refuses an output that happens to lie in the rows past a cache's
    # end, as the library does: those calls ran again with the exact rows).
    rounded = hf.row_capacity(batch * KV_HEADS * 81)
    first = [key for key, layout in zip(recorder.keys, recorder.layouts) if layout[1] == rounded]
    assert len(first) == 12 * layers and len(set(first)) == 1, set(first)
    assert len(recorder.keys) - len(first) == hf.decode_reuse["exact_retries"] - retries
    assert recorder.layouts[0][1:] == [rounded, ops.TOKEN_ROW_PAGE, 1] + [HEAD_DIM] * 3, recorder.layouts[0]


def test_decode_steps_of_a_growing_cache_share_one_plan_key():
    _with_decode_reuse_on(_test_decode_steps_of_a_growing_cache_share_one_plan_key)

def _test_decode_over_a_static_view_names_the_storage_rows():
    # K/V views into a larger buffer (a static cache's, or a preallocated one): the layout names the
    # rows up to the end of the storage (the same at every step), so growing key counts within a
    # capacity bucket share the plan key; masks with left padding take the device path.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    generator = torch.Generator().manual_seed(32)
    batch, total = 3, 64
    buffer = torch.randn((2, batch, KV_HEADS, total, HEAD_DIM), generator=generator).bfloat16()
    starts = [3, 0, 7]
    with OpRecorder() as recorder:
        for kv_len in range(40, 48):
            key, value = buffer[0, :, :, :kv_len], buffer[1, :, :, :kv_len]
            allowed = _allowed(starts, [kv_len] * batch, 1, kv_len)
            for mask in (None, allowed[:, None]):
                query = torch.randn((batch, 1, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
                out, _ = hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
                expected_allowed = allowed if mask is not None else _allowed([0] * batch, [kv_len] * batch, 1, kv_len)
                _check_rows(out, dense_attention(query, key, value, expected_allowed, SCALE), expected_allowed,
                            f"S={kv_len} mask={mask is not None}")
    assert len(set(recorder.keys)) == 1, set(recorder.keys)
    # V's storage ends first: the rows from V's base to the end of the buffer.
    assert recorder.layouts[0][1] == batch * KV_HEADS * total, recorder.layouts[0]


def test_decode_over_a_static_view_names_the_storage_rows():
    _with_decode_reuse_on(_test_decode_over_a_static_view_names_the_storage_rows)

def _test_decode_steps_of_one_layout_write_the_key_counts_only():
    # Without a mask, cu_seqlens_q and the block table depend on the layout alone (entries clamped
    # below the layout's row count): a step of the layout the buffers hold writes the key counts
    # only (no host write); a new layout, or a step after a masked one (device-written), writes
    # the whole buffer. The outputs stay right and the table holds the layout's rows.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    hf._decode_buffers.clear()
    generator = torch.Generator().manual_seed(33)
    batch, total = 2, 80
    buffer = torch.randn((2, batch, KV_HEADS, total, HEAD_DIM), generator=generator).bfloat16()
    with CountingHostWrites() as writes:
        def step(kv_len, mask=None):
            key, value = buffer[0, :, :, :kv_len], buffer[1, :, :, :kv_len]
            query = torch.randn((batch, 1, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
            out, _ = hf.attention_forward(Module(), query, key, value, mask, scaling=SCALE)
            allowed = _allowed([0] * batch, [kv_len] * batch, 1, kv_len) if mask is None else mask[:, 0]
            _check_rows(out, dense_attention(query, key, value, allowed, SCALE), allowed, f"S={kv_len}")

        for kv_len in range(40, 48):
            step(kv_len)
        assert len(writes) == 1, writes
        metadata = hf._decode_step["entry"][2]
        rows = batch * KV_HEADS * total          # V's storage rows: the layout's row count
        heads = [b * KV_HEADS * total + h * total for b in range(batch) for h in range(KV_HEADS)]
        pages = hf.key_capacity(47) // ops.TOKEN_ROW_PAGE
        expected = [[min(start + ops.TOKEN_ROW_PAGE * p, rows - 1) for p in range(pages)]
                    for start in heads for _ in range(2)]
        assert metadata.block_table.tolist() == expected, metadata.block_table.tolist()
        assert metadata.seq_lens_k.tolist() == [0, 47] * batch * KV_HEADS
        assert metadata.cu_seqlens_q.tolist() == [i // 2 for i in range(2 * batch * KV_HEADS + 1)]
        step(48, _allowed([3, 0], [48, 48], 1, 48)[:, None])      # device-written
        step(49)
        assert len(writes) == 2, writes
        step(70)                                                    # another capacity: another layout
        step(71)
        assert len(writes) == 3, writes


def test_decode_steps_of_one_layout_write_the_key_counts_only():
    _with_decode_reuse_on(_test_decode_steps_of_one_layout_write_the_key_counts_only)


def _test_decode_steps_of_a_growing_cache_shift_the_table_in_place():
    # A DynamicCache one key longer per step moves each (batch row, KV head)'s rows up (its head
    # and batch strides grow with the keys): the step shifts the block table in place (device ops,
    # no host write) while the row count's capacity holds, and writes it anew when the capacity
    # changes or the rows shrink (another, shorter cache). At every step the table is entry for
    # entry what a full write gives and the outputs are right.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    hf._decode_buffers.clear()
    generator = torch.Generator().manual_seed(34)

    def step(key, value, what):
        query = torch.randn((key.shape[0], 1, Q_HEADS, HEAD_DIM), generator=generator).bfloat16().transpose(1, 2)
        out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
        batch, kv_len = key.shape[0], key.shape[2]
        allowed = _allowed([0] * batch, [kv_len] * batch, 1, kv_len)
        assert_close_bf16(out, dense_attention(query, key, value, allowed, SCALE), what)
        metadata = hf._decode_step["entry"][2]
        pages = hf.key_capacity(kv_len) // ops.TOKEN_ROW_PAGE
        last_row = hf.row_capacity(batch * KV_HEADS * kv_len) - 1
        expected = [[min(b * KV_HEADS * kv_len + h * kv_len + ops.TOKEN_ROW_PAGE * p, last_row) for p in range(pages)]
                    for b in range(batch) for h in range(KV_HEADS) for _ in range(2)]
        assert metadata.block_table.tolist() == expected, what
        assert metadata.seq_lens_k.tolist() == [0, kv_len] * batch * KV_HEADS, what
        assert metadata.cu_seqlens_q.tolist() == [i // 2 for i in range(2 * batch * KV_HEADS + 1)], what

    with CountingHostWrites() as writes:
        for batch, start in ((2, 70), (1, 250)):
            hf._decode_buffers.clear()
            writes.clear()
            key, value = (torch.randn((batch, KV_HEADS, start, HEAD_DIM), generator=generator).bfloat16()
                          for _ in range(2))
            shifted = None
            capacities = set()
            for n in range(14):
                if n:
                    new = [torch.randn((batch, KV_HEADS, 1, HEAD_DIM), generator=generator).bfloat16() for _ in range(2)]
                    key, value = _grown(key, value, new)
                step(key, value, f"batch {batch} S={key.shape[2]}")
                capacities.add((hf.key_capacity(key.shape[2]), hf.row_capacity(batch * KV_HEADS * key.shape[2])))
                buffers = next(iter(hf._decode_buffers.values()))
                shifted = buffers.shifted
            # One host write per capacity (the first step's included); every other step shifted.
            assert len(writes) == len(capacities), (batch, writes, capacities)
            assert shifted == 14 - len(capacities), (batch, shifted, capacities)
            # A shorter cache of the same capacities: the rows shrank, so the table is written anew.
            before = len(writes)
            step(key[:, :, :-3].contiguous(), value[:, :, :-3].contiguous(), f"batch {batch} shrunk")
            assert len(writes) == before + 1, (batch, writes)


def test_decode_steps_of_a_growing_cache_shift_the_table_in_place():
    _with_decode_reuse_on(_test_decode_steps_of_a_growing_cache_shift_the_table_in_place)


def test_decode_layout_fill_writes_the_layout_values():
    # _fill_decode_layout writes a no-mask decode step's metadata: the values the layout defines
    # (cu_seqlens_q 0, 0, 1, 1, ..; seq_lens_k 0, kv_len per pair; head start + 16 p clamped to
    # last_row at page p of both sequences of a pair), with rows past the metadata left as they were.
    _setup()
    buffers = hf.StepBuffers(torch.device("cpu"))
    cases = [(3, 2, 5, 37, 200, 37, 150), (1, 4, 8, 113, 113 * 4, 113, 113 * 4 - 1), (2, 1, 3, 16, 64, 40, 20)]
    for batch, kv_heads, pages, kv_len, rows_per_batch, head_rows, last_row in cases:
        num_seqs = 2 * batch * kv_heads
        _, _, _, offsets = buffers.views(num_seqs, pages)
        seq_offset, table_offset, entries = offsets
        expected_table = [[min(b * rows_per_batch + h * head_rows + ops.TOKEN_ROW_PAGE * p, last_row)
                           for p in range(pages)] for b in range(batch) for h in range(kv_heads) for _ in range(2)]
        host = torch.full((entries + 7,), -5, dtype=torch.int32)
        hf._fill_decode_layout(host[:entries], buffers, offsets, num_seqs, pages, kv_len, batch, kv_heads,
                               rows_per_batch, head_rows, last_row)
        label = f"batch={batch} kv_heads={kv_heads} pages={pages}"
        assert host[:num_seqs + 1].tolist() == [i // 2 for i in range(num_seqs + 1)], label
        assert host[seq_offset:seq_offset + num_seqs].tolist() == [0, kv_len] * (num_seqs // 2), label
        assert host[table_offset:entries].view(num_seqs, pages).tolist() == expected_table, label
        assert host[entries:].tolist() == [-5] * 7, label


def _test_decode_retries_with_the_exact_rows_when_the_rounded_rows_are_refused():
    # The rounded-up row count names rows past a DynamicCache tensor's end; where an output lies
    # there the library refuses the call, and the layer runs again with the exact rows.
    _setup()
    hf._step["entry"] = hf._decode_step["entry"] = None
    query, key, value = _qkv(1, 1, 37, 41)
    exact = KV_HEADS * 37

    def refusing(*args):
        if args[6][1] != exact:
            raise wideattn.InvalidArgumentError("wideattn_plan_run", "o overlaps k_cache (stand-in)")
        return recorder.op(*args)

    retries = hf.decode_reuse["exact_retries"]
    with OpRecorder(refusing) as recorder:
        out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
    assert hf.decode_reuse["exact_retries"] == retries + 1
    assert [layout[1] for layout in recorder.layouts] == [hf.row_capacity(exact), exact], recorder.layouts
    allowed = _allowed([0], [37], 1, 37)
    assert_close_bf16(out, dense_attention(query, key, value, allowed, SCALE), "exact retry")


def test_decode_retries_with_the_exact_rows_when_the_rounded_rows_are_refused():
    _with_decode_reuse_on(_test_decode_retries_with_the_exact_rows_when_the_rounded_rows_are_refused)

def _test_debug_mode_and_tracing_keep_the_per_call_path():
    # Debug mode (every call checked, nothing shared) and torch.compile / CUDA-graph capture (no
    # state kept across calls) run the earlier form: the exact layout with its KV heads, metadata
    # built for the call.
    _setup()
    query, key, value = _qkv(2, 1, 30, 42)
    allowed = _allowed([0, 0], [30, 30], 1, 30)
    tracing = hf._capturing_or_compiling
    for mode in ("debug", "tracing"):
        was = wideattn.set_debug(mode == "debug")
        if mode == "tracing":
            hf._capturing_or_compiling = lambda device: True
        try:
            builds = hf.step_builds["count"]
            with OpRecorder() as recorder:
                for _ in range(2):
                    out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
                    assert_close_bf16(out, dense_attention(query, key, value, allowed, SCALE), mode)
        finally:
            wideattn.set_debug(was)
            hf._capturing_or_compiling = tracing
        assert [layout[1:4] for layout in recorder.layouts] == [[30 * KV_HEADS + 30, ops.TOKEN_ROW_PAGE, KV_HEADS]] * 2, \
            (mode, recorder.layouts)
        assert hf.step_builds["count"] == builds + 2, mode


def test_debug_mode_and_tracing_keep_the_per_call_path():
    _with_decode_reuse_on(_test_debug_mode_and_tracing_keep_the_per_call_path)

def test_decode_reuse_is_on_by_default_and_off_by_request():
    # On unless $WIDEATTN_DECODE_REUSE=0; set_decode_reuse(False) turns it off: a decode step then
    # runs the per-call form (the exact layout with its KV heads).
    _setup()
    previous = hf.set_decode_reuse(False)
    assert previous is (os.environ.get(hf.ENV_DECODE_REUSE, "") != "0")
    try:
        query, key, value = _qkv(2, 1, 30, 43)
        calls = hf.decode_reuse["per_head_calls"]
        with OpRecorder() as recorder:
            out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
        assert_close_bf16(out, dense_attention(query, key, value, _allowed([0, 0], [30, 30], 1, 30), SCALE), "off")
        assert hf.decode_reuse["per_head_calls"] == calls
        assert recorder.layouts[0][1:4] == [30 * KV_HEADS + 30, ops.TOKEN_ROW_PAGE, KV_HEADS], recorder.layouts
        assert hf.set_decode_reuse(True) is False
        with OpRecorder() as recorder:
            out, _ = hf.attention_forward(Module(), query, key, value, None, scaling=SCALE)
        assert_close_bf16(out, dense_attention(query, key, value, _allowed([0, 0], [30, 30], 1, 30), SCALE), "on")
        assert hf.decode_reuse["per_head_calls"] == calls + 1
        assert recorder.layouts[0][3] == 1, recorder.layouts
    finally:
        hf.set_decode_reuse(previous)
    harness.expect_raises(TypeError, ["set_decode_reuse: on=1; expected a bool"], hf.set_decode_reuse, 1)


def test_decode_reuse_variable_is_read_at_import_and_named_when_set_wrongly():
    # $WIDEATTN_DECODE_REUSE, read when wideattn.transformers is imported: unset, empty or 1 on, 0
    # off; any other value fails the import naming the variable and the value.
    import subprocess
    probe = "import wideattn.transformers as t; print('reuse', t.set_decode_reuse(False))"
    for value, code, needle in (
            (None, 0, "reuse True"), ("", 0, "reuse True"), ("1", 0, "reuse True"), ("0", 0, "reuse False"),
            ("maybe", 1, "$WIDEATTN_DECODE_REUSE='maybe': use 1 / unset (plan reuse across decode steps) or 0 (off)")):
        env = {name: text for name, text in os.environ.items() if name != hf.ENV_DECODE_REUSE}
        if value is not None:
            env[hf.ENV_DECODE_REUSE] = value
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
        output = done.stdout if code == 0 else done.stderr
        assert done.returncode == code and needle in output, (value, done.returncode, done.stdout, done.stderr[-400:])
        if code:
            assert "InvalidArgumentError" in done.stderr, done.stderr[-400:]


def test_switch_from_env_reads_its_default_and_refuses_other_values():
    # library.switch_from_env: "1" on, "0" off, unset or empty the default (off unless default=True);
    # any other value refused naming the variable, the value and what each setting means.
    name = "WIDEATTN_TEST_SWITCH"
    saved = os.environ.pop(name, None)
    switch = wideattn.library.switch_from_env
    try:
        assert switch(name, "a test switch") is False and switch(name, "a test switch", default=True) is True
        for value, off_default, on_default in (("1", True, True), ("0", False, False), ("", False, True)):
            os.environ[name] = value
            assert switch(name, "a test switch") is off_default, value
            assert switch(name, "a test switch", default=True) is on_default, value
        os.environ[name] = "maybe"
        harness.expect_raises(wideattn.InvalidArgumentError,
                              ["$WIDEATTN_TEST_SWITCH='maybe': use 1 (a test switch) or 0 / unset (off)"],
                              switch, name, "a test switch")
        harness.expect_raises(wideattn.InvalidArgumentError,
                              ["$WIDEATTN_TEST_SWITCH='maybe': use 1 / unset (a test switch) or 0 (off)"],
                              switch, name, "a test switch", default=True)
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def test_hf_gemma4_e4m3_attention_runs_one_causal_sequence_on_an_e4m3_cache_with_v_transposed():
    """tools/bench/hf_gemma4.py's E4M3_ATTENTION (the 8-bit gate on transformers' code): K and V
    quantised into a paged e4m3 cache (V transposed, 16-slot pages, a partial last page), the
    op's reference on the CPU; within e4m3's error of the bf16 inputs' attention and not equal to
    it (the quantisation happened); the last 3 queries alone (a chunk over a cache) give the
    last 3 rows; other calls refused by name."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))
    import hf_gemma4
    torch.manual_seed(7)
    tokens, head_dim = 37, hf_gemma4.GLOBAL_HEAD_DIM
    query = torch.randn(1, Q_HEADS, tokens, head_dim).bfloat16()
    key = torch.randn(1, KV_HEADS, tokens, head_dim).bfloat16()
    value = torch.randn(1, KV_HEADS, tokens, head_dim).bfloat16()
    scale = head_dim ** -0.5
    served = hf_gemma4.e4m3_calls["served"]
    out, weights = hf_gemma4.e4m3_attention(None, query, key, value, None, scaling=scale)
    assert weights is None and tuple(out.shape) == (1, tokens, Q_HEADS, head_dim) and out.dtype == torch.bfloat16
    assert hf_gemma4.e4m3_calls["served"] == served + 1
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()[None]
    expected = dense_attention(query, key, value, causal, scale)
    rel = ((out.double() - expected).norm() / expected.norm()).item()
    assert 1e-3 < rel < 5e-2, rel
    last, _ = hf_gemma4.e4m3_attention(None, query[:, :, -3:], key, value, None, scaling=scale)
    assert ((last.double() - out[:, -3:].double()).norm() / out[:, -3:].double().norm()).item() < 1e-2
    for q, k, what in ((query.repeat(2, 1, 1, 1), key.repeat(2, 1, 1, 1), "batch 2"),
                       (query.repeat(1, 1, 2, 1), key, "74 queries over 37 keys")):
        try:
            hf_gemma4.e4m3_attention(None, q, k, k, None, scaling=scale)
        except NotImplementedError as e:
            assert what in str(e), e
        else:
            raise AssertionError(f"{what} was served")



class _KNorm(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)


class _GlobalAttention(torch.nn.Module):
    """The attributes of a Gemma 4 global attention module that wideattn.v_only_cache reads."""

    is_causal = True
    layer_type = "full_attention"

    def __init__(self, layer_idx, weight):
        super().__init__()
        self.layer_idx = layer_idx
        self.k_norm = _KNorm(weight)


class _Rotary(torch.nn.Module):
    def __init__(self, inv_freq):
        super().__init__()
        self.register_buffer("full_attention_inv_freq", inv_freq)


class _KfvModel(torch.nn.Module):
    """A stand-in model: one global attention module and the rotary buffer (proportional RoPE:
    64 rotated frequencies of 256, zeros after)."""

    def __init__(self, layer_idx=5, seed=3):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        weight = (1.0 + 0.3 * torch.randn(KFV_HEAD_DIM, generator=generator)).bfloat16().float()
        inv_freq = torch.zeros(KFV_HEAD_DIM // 2)
        inv_freq[:KFV_ROTARY // 2] = 1.0 / (1.0e6 ** (torch.arange(0, KFV_ROTARY, 2).float() / KFV_HEAD_DIM))
        self.attn = _GlobalAttention(layer_idx, weight)
        self.rotary = _Rotary(inv_freq)


KFV_HEAD_DIM = 512
KFV_ROTARY = 128


def _k_from_v_expected(query, value, model, scale, dequantised=None):
    """float64 attention over K rebuilt from V by wideattn.reference (positions 0 ..), causal
    bottom-right: [1, T, Hq, D]."""
    v = value if dequantised is None else dequantised
    rows = v[0].transpose(0, 1)
    frequencies = reference.k_from_v_inv_freq(KFV_HEAD_DIM, KFV_ROTARY, 0.0,
                                              model.rotary.full_attention_inv_freq[:KFV_ROTARY // 2])
    keys = reference.k_from_v_keys(rows, torch.arange(rows.shape[0]), model.attn.k_norm.weight.float(), frequencies)
    q_len, kv_len = query.shape[2], value.shape[2]
    allowed = (torch.arange(kv_len)[None, :] <= torch.arange(q_len)[:, None] + kv_len - q_len)[None]
    return dense_attention(query, keys.transpose(0, 1)[None], v, allowed, scale)


def test_v_only_calls_rebuild_k_from_the_cached_v():
    """A V-only cache layer's call (key is value, wideattn.v_only_cache): served by
    prefill_k_from_v with the module's k_norm weight and the model's RoPE frequencies, never by
    SDPA; equal to attention over K rebuilt by wideattn.reference (bf16 V), within e4m3's error
    of it for e4m3 V and not equal (the quantisation happened); a call of several queries runs
    through the rebuild into a K + V scratch (wideattn::k_from_v_rebuild), with no kernel pinned;
    the first update's ordinary key is not such a call."""
    from wideattn import ops, v_only_cache
    recorder = _setup()
    model = _KfvModel()
    v_only_cache.register_model(model)
    generator = torch.Generator().manual_seed(11)
    rebuilds = []
    real_rebuild = ops._k_from_v_rebuild_op

    def rebuild(*args):
        rebuilds.append(wideattn.default_context().prefill_kernel)
        return real_rebuild(*args)

    ops._k_from_v_rebuild_op = rebuild
    try:
        _v_only_calls(v_only_cache, model, generator, rebuilds)
    finally:
        ops._k_from_v_rebuild_op = real_rebuild
    assert not recorder.calls
    key = torch.randn((1, KV_HEADS, 8, KFV_HEAD_DIM), generator=generator).bfloat16()
    assert not v_only_cache.is_v_only_call(model.attn, key, key.clone())
    assert not v_only_cache.is_v_only_call(_GlobalAttention(7, model.attn.k_norm.weight), key, key)
    query = torch.randn((1, Q_HEADS, 4, KFV_HEAD_DIM), generator=generator).bfloat16()
    value = torch.randn((1, KV_HEADS, 3, KFV_HEAD_DIM), generator=generator).bfloat16()
    harness.expect_raises(NotImplementedError, ["at most as many queries as keys", "4 queries over 3 keys"],
                          v_only_cache.k_from_v_forward, model.attn, query, value, 1.0)


def test_v_only_calls_of_a_left_padded_batch():
    """A V-only layer's call over a batch with left padding (a 2-D padding mask, as generate passes
    it): each row's K is rebuilt from its real keys at positions 0 .. from its first real token
    (transformers numbers a left-padded row's positions so), its queries at padded positions give
    zeros, and each row equals that row alone without padding; bf16 and e4m3 V, one query (decode)
    and several (a chunk, one of whose queries is padding), and a row without padding beside a
    padded one. A mask of another form is refused by name."""
    from wideattn import v_only_cache
    _setup()
    model = _KfvModel()
    v_only_cache.register_model(model)
    generator = torch.Generator().manual_seed(23)
    scale = KFV_HEAD_DIM ** -0.5
    for q_len, kv_len, pads in ((1, 40, (0, 7)), (3, 37, (5, 0)), (2, 33, (17, 3)), (3, 5, (3, 0))):
        batch = len(pads)
        query = torch.randn((batch, Q_HEADS, q_len, KFV_HEAD_DIM), generator=generator).bfloat16()
        value = torch.randn((batch, KV_HEADS, kv_len, KFV_HEAD_DIM), generator=generator).bfloat16()
        mask = torch.ones((batch, kv_len), dtype=torch.long)
        for b, pad in enumerate(pads):
            mask[b, :pad] = 0
        for e4m3 in (False, True):
            v_only_cache._layer_e4m3[model.attn.layer_idx] = e4m3
            out, weights = hf.attention_forward(model.attn, query, value, value, mask, scaling=scale)
            assert weights is None and tuple(out.shape) == (batch, q_len, Q_HEADS, KFV_HEAD_DIM), out.shape
            for b, pad in enumerate(pads):
                real_q = q_len - max(pad - (kv_len - q_len), 0)  # the queries at real positions
                alone = _k_from_v_expected(query[b:b + 1, :, q_len - real_q:], value[b:b + 1, :, pad:], model, scale)
                got = out[b:b + 1, q_len - real_q:]
                if not e4m3:
                    assert_close_bf16(got, alone, f"row {b} of {pads}, {q_len} over {kv_len}")
                else:
                    rel = ((got.double() - alone).norm() / alone.norm()).item()
                    assert rel < 8e-2, (b, pads, rel)
                assert not out[b, :q_len - real_q].any()
    v_only_cache._layer_e4m3.clear()
    query = torch.randn((2, Q_HEADS, 1, KFV_HEAD_DIM), generator=generator).bfloat16()
    value = torch.randn((2, KV_HEADS, 9, KFV_HEAD_DIM), generator=generator).bfloat16()
    holes = torch.ones((2, 9), dtype=torch.long)
    holes[0, 4] = 0                                  # a hole in the middle: no key range
    harness.expect_raises(NotImplementedError, ["causal masks with left padding"], hf.attention_forward, model.attn,
                          query, value, value, holes, scaling=scale)


def _v_only_calls(v_only_cache, model, generator, rebuilds):
    """test_v_only_calls_rebuild_k_from_the_cached_v's calls (rebuilds: the pin seen at each rebuild)."""
    for q_len, kv_len in ((1, 37), (5, 40), (19, 19)):
        query = torch.randn((1, Q_HEADS, q_len, KFV_HEAD_DIM), generator=generator).bfloat16()
        value = torch.randn((1, KV_HEADS, kv_len, KFV_HEAD_DIM), generator=generator).bfloat16()
        scale = KFV_HEAD_DIM ** -0.5
        expected = _k_from_v_expected(query, value, model, scale)
        for e4m3, power_of_two in ((False, False), (True, False), (True, True)):
            v_only_cache._layer_e4m3[model.attn.layer_idx] = e4m3
            v_only_cache._layer_power_of_two[model.attn.layer_idx] = power_of_two
            before, rebuilt = hf.calls["k_from_v"], len(rebuilds)
            scales = []
            real_quantize = v_only_cache._quantization.quantize_to_cache

            def quantize(src, cache, slots, v_scale, *args, **kwargs):
                scales.append(v_scale.item())
                return real_quantize(src, cache, slots, v_scale, *args, **kwargs)

            v_only_cache._quantization.quantize_to_cache = quantize
            try:
                out, weights = hf.attention_forward(model.attn, query, value, value, None, scaling=scale)
            finally:
                v_only_cache._quantization.quantize_to_cache = real_quantize
            assert weights is None and tuple(out.shape) == (1, q_len, Q_HEADS, KFV_HEAD_DIM), out.shape
            assert hf.calls["k_from_v"] == before + 1
            assert len(rebuilds) == rebuilt + (q_len > 1) and not any(rebuilds), (q_len, rebuilds)
            if not e4m3:
                assert_close_bf16(out, expected, f"V only, {q_len} over {kv_len}")
                assert not scales
            else:
                rel = ((out.double() - expected).norm() / expected.norm()).item()
                assert 1e-3 < rel < 8e-2, (q_len, kv_len, power_of_two, rel)
                amax = value.float().abs().max().item()
                assert len(scales) == 1 and scales[0] >= amax / 448.0 * (1 - 1e-6), (scales, amax)
                assert (math.frexp(scales[0])[0] == 0.5) == power_of_two or scales[0] == amax / 448.0, scales
                if power_of_two:
                    assert scales[0] < 2 * amax / 448.0, (scales, amax)
    v_only_cache._layer_e4m3.clear()
    v_only_cache._layer_power_of_two.clear()


def test_rotary_table_takes_the_leading_frequencies_and_refuses_other_buffers():
    from wideattn import v_only_cache
    model = _KfvModel()
    rotary_dims, table = v_only_cache.rotary_table(model.rotary.full_attention_inv_freq)
    assert rotary_dims == KFV_ROTARY and table.dtype == torch.float32 and table.shape[0] == KFV_ROTARY // 2
    assert torch.equal(table, model.rotary.full_attention_inv_freq[:KFV_ROTARY // 2])
    for bad in (torch.zeros(8), torch.tensor([1.0, 0.0, 0.5, 0.0])):
        try:
            v_only_cache.rotary_table(bad)
        except ValueError as e:
            assert "rotated frequencies followed by zeros" in str(e), e
        else:
            raise AssertionError(f"{bad} accepted")


class _FakeDynamicLayer:
    """transformers.cache_utils.DynamicLayer's contract as wideattn.v_only_cache uses it."""

    def __init__(self):
        self.keys = self.values = None
        self.is_initialized = False

    def lazy_initialization(self, key_states):
        self.keys = torch.tensor([], dtype=key_states.dtype)
        self.values = torch.tensor([], dtype=key_states.dtype)
        self.is_initialized = True

    def update(self, key_states, value_states, cache_kwargs=None):
        if not self.is_initialized:
            self.lazy_initialization(key_states)
        self.keys = torch.cat([self.keys, key_states], dim=-2) if self.keys.numel() else key_states
        self.values = torch.cat([self.values, value_states], dim=-2) if self.values.numel() else value_states
        return self.keys, self.values


class _FakeDynamicCache:
    def __init__(self, config=None):
        self.layers = [_FakeDynamicLayer() for _ in config.layer_types]


class _FakeConfig:
    def __init__(self, k_eq_v=True, attention="wideattn"):
        self.layer_types = ["sliding_attention"] * 5 + ["full_attention"]
        self.attention_k_eq_v = k_eq_v
        self._attn_implementation = attention


def test_v_only_cache_keeps_v_alone_in_the_global_layers():
    """v_only_cache on a stand-in transformers (DynamicLayer / DynamicCache contract): the global
    layer keeps V only (its bytes half of a K + V layer's), returns the prompt's own keys on the
    first update and V as key and value after; another attention implementation, a config
    without attention_k_eq_v and a DynamicCache whose layer count the module does not expect are
    refused by name."""
    import types
    saved = {name: sys.modules.get(name) for name in ("transformers", "transformers.cache_utils")}
    fake = types.ModuleType("transformers")
    fake.DynamicCache = _FakeDynamicCache
    fake_utils = types.ModuleType("transformers.cache_utils")
    fake_utils.DynamicLayer = _FakeDynamicLayer
    sys.modules["transformers"], sys.modules["transformers.cache_utils"] = fake, fake_utils
    try:
        from wideattn import v_only_cache
        v_only_cache._layer_class.clear()
        model = _KfvModel()
        model.config = _FakeConfig()
        cache = v_only_cache.v_only_cache(model)
        reference_cache = _FakeDynamicCache(model.config)
        generator = torch.Generator().manual_seed(5)
        for tokens in (6, 1, 3):
            key = torch.randn((1, KV_HEADS, tokens, KFV_HEAD_DIM), generator=generator).bfloat16()
            value = torch.randn((1, KV_HEADS, tokens, KFV_HEAD_DIM), generator=generator).bfloat16()
            first = cache.layers[5].get_seq_length() == 0
            k, v = cache.layers[5].update(key, value)
            reference_cache.layers[5].update(key, value)
            assert torch.equal(v, reference_cache.layers[5].values)
            assert (k is key) if first else (k is v), tokens
            assert v_only_cache.is_v_only_call(model.attn, k, v) == (not first)
        assert cache.layers[5].get_seq_length() == 10
        assert 2 * v_only_cache.cache_bytes(cache, [5]) == v_only_cache.cache_bytes(reference_cache, [5])
        assert type(cache.layers[0]) is _FakeDynamicLayer
        model.config._attn_implementation = "sdpa"
        harness.expect_raises(ValueError, ["'wideattn'", "'sdpa'"], cache.layers[5].update, key, value)
        model.config = _FakeConfig(k_eq_v=False)
        harness.expect_raises(ValueError, ["attention_k_eq_v"], v_only_cache.v_only_cache, model)
        model.config = _FakeConfig()
        model.config.num_kv_shared_layers = 2    # the stand-in cache still makes a layer for every type
        harness.expect_raises(ValueError, ["made 6 layers for 6 layer types"], v_only_cache.v_only_cache, model)
        model.config = _FakeConfig()
        harness.expect_raises(ValueError, ["power_of_two_scale=True", "e4m3=True"], v_only_cache.v_only_cache, model,
                              power_of_two_scale=True)
        cache = v_only_cache.v_only_cache(model, e4m3=True, power_of_two_scale=True)
        assert cache.layers[5].e4m3 and cache.layers[5].power_of_two_scale
    finally:
        v_only_cache._layer_class.clear()
        v_only_cache._layer_e4m3.clear()
        v_only_cache._layer_power_of_two.clear()
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

if __name__ == "__main__":
    harness.run(dict(globals()))
