"""test_transformers_k_from_v.py - Gemma 4's global layers over a V-only cache
(wideattn.v_only_cache: K rebuilt from V in the kernels) in transformers' own Gemma 4 code on a GPU
(run by tools/gpu/gpu_suite.sh; exits 77, skipped, without torch, CUDA or a transformers with
Gemma4ForCausalLM). The model: tools/bench/hf_gemma4.py (Gemma 4 31B's attention shapes, random
peaked weights), $WIDEATTN_HF_LAYERS layers (default 12; 60 is the 31B depth).

Each gate is the paired rule (margin 0.10 x the baseline's mean KL against the float32-attention
reference of one forward over the whole sequence): the candidate is the V-only path, the baseline
the K + V path run the same way, so the gate asks whether caching V alone changes what the model
computes. bf16: the "wideattn" attention over transformers' DynamicCache (K + V) against the same
over v_only_cache(model). e4m3: hf_gemma4's E4M3_ATTENTION over a DynamicCache (each call's K and
V quantised with one scale each) against v_only_cache(model, e4m3=True) (V quantised with one
scale, K rebuilt from the e4m3 V), and teacher-forced also with that scale rounded up to a power
of two (power_of_two_scale=True).
  - teacher-forced: PROMPT_TOKENS, then CHUNK_TOKENS per forward to TEACHER_TOKENS (every chunk
    after the first runs over the V-only cache: its keys rebuilt into a K + V scratch, then the
    K + V prefill kernel);
  - greedy generation of NEW_TOKENS tokens after each of GREEDY_PROMPTS GREEDY_PROMPT-token
    prompts (every step a single-token decode over the V-only cache): the tokens equal the K + V
    path's, or part at a near tie (NEAR_TIE_LOGIT in the K + V path's logits of that step), and
    the gate on the pooled decode rows of the V-only path's sequences (the prompts' rows come from
    their own K on both paths) ACCEPTs (64 rows of one prompt left it INCONCLUSIVE at 60 layers);
  - a left-padded batch of two prompts (PADDED_PROMPTS tokens) through generate() over one V-only
    cache: each row's PADDED_NEW_TOKENS greedy tokens equal those of its prompt alone over a
    V-only cache, or part at a near tie of the lone run's logits;
  - memory: one forward of a MEMORY_TOKENS prompt into each cache (the prompt's own K serves its
    attention; the V-only cache keeps V alone): the global layers' cache bytes, V-only over K + V
    (bar: one half), and the whole cache's.
Every V-only run also checks that its calls reached the K-from-V path.

usage: PYTHONPATH=build/python python3 tests/gpu/test_transformers_k_from_v.py CLI [OUT_DIR]
       (CLI: the wideattn binary whose `accuracy gate` decides; OUT_DIR receives the gate JSONs
       and k_from_v_memory.json)
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))
import harness  # noqa: E402

harness.require_transformers_gemma4()
import numpy  # noqa: E402
import torch  # noqa: E402

from transformers import DynamicCache  # noqa: E402

import e2e_drift  # noqa: E402
import hf_gemma4  # noqa: E402
from wideattn import v_only_cache  # noqa: E402

LAYERS = int(os.environ.get("WIDEATTN_HF_LAYERS", hf_gemma4.DEFAULT_LAYERS))
PROMPT_TOKENS = 256
CHUNK_TOKENS = 64
TEACHER_TOKENS = 2048
GREEDY_PROMPT = 256
NEW_TOKENS = 64
GREEDY_PROMPTS = 3             # prompts whose greedy continuations the gate pools (192 decode rows)
MEMORY_TOKENS = 32768
NEAR_TIE_LOGIT = 0.25          # a parting greedy token this close to the top logit is a rounding tie
MARGIN_REL = 0.10
CONFIDENCE = 0.95
SEED = 0

_state = {}


def model():
    if "model" not in _state:
        hf_gemma4.register_attention()
        _state["model"] = hf_gemma4.build_model(seed=SEED, layers=LAYERS)
        vocab = _state["model"].config.vocab_size
        generator = torch.Generator().manual_seed(SEED)
        _state["tokens"] = torch.randint(0, vocab, (TEACHER_TOKENS,), generator=generator).cuda()
    return _state["model"]


def out_dir():
    path = sys.argv[2] if len(sys.argv) > 2 else _state.setdefault("out", tempfile.mkdtemp(prefix="wideattn_kfv_"))
    os.makedirs(path, exist_ok=True)
    return path


def kv_path(e4m3):
    """(attention, cache) of the K + V baseline."""
    m = model()
    return (hf_gemma4.E4M3_ATTENTION if e4m3 else "wideattn"), DynamicCache(config=m.config)


def v_only_path(e4m3, power_of_two=False):
    m = model()
    return "wideattn", v_only_cache.v_only_cache(m, e4m3=e4m3, power_of_two_scale=power_of_two)


def gate(sequences, label, e4m3, first, chunk, rows_from=0, power_of_two=False):
    """The paired gate on teacher-forced logits of `sequences` (token tensors, their rows pooled):
    V-only candidate, K + V baseline, each run in pieces (hf_gemma4.chunked_logits), against one
    float32-attention forward; on each sequence's rows from `rows_from` on (the greedy gate: the
    decode steps' rows only, not the prompt's, which both paths compute from the prompt's own K)."""
    m = model()
    rows = {"reference": [], "baseline": [], "candidate": []}
    targets = []
    served = 0
    for tokens in sequences:
        rows["reference"].append(hf_gemma4.logits(m, tokens, hf_gemma4.FP32_REFERENCE).cpu().numpy()[rows_from:])
        attention, cache = kv_path(e4m3)
        rows["baseline"].append(
            hf_gemma4.chunked_logits(m, tokens, attention, cache, first, chunk).cpu().numpy()[rows_from:])
        before = hf_gemma4.k_from_v_calls()
        attention, cache = v_only_path(e4m3, power_of_two)
        rows["candidate"].append(
            hf_gemma4.chunked_logits(m, tokens, attention, cache, first, chunk).cpu().numpy()[rows_from:])
        served += hf_gemma4.k_from_v_calls() - before
        targets += (tokens[1:].tolist() + [0])[rows_from:]
    assert served > 0, "no call ran over the V-only cache"
    reference, baseline, candidate = (numpy.concatenate(rows[name]) for name in ("reference", "baseline",
                                                                                  "candidate"))
    dump_dir = tempfile.mkdtemp(prefix="wideattn_kfv_dumps_")
    paths = {}
    for name, array in (("reference", reference), ("baseline", baseline), ("candidate", candidate)):
        paths[name] = os.path.join(dump_dir, f"{label}_{name}.h5")
        e2e_drift.write_dump(paths[name], array, targets, "transformers Gemma4ForCausalLM (random)", name, name)
    verdict, why = e2e_drift.run_cli_gate(sys.argv[1], paths["reference"], paths["candidate"], paths["baseline"],
                                          os.path.join(out_dir(), f"gate_{label}.json"), 0.0, MARGIN_REL, CONFIDENCE)
    if verdict is None:
        cand, _ = e2e_drift.kl_per_token(reference, candidate)
        base, _ = e2e_drift.kl_per_token(reference, baseline)
        verdict = e2e_drift.paired_gate(list(cand), list(base), 0.0, MARGIN_REL, CONFIDENCE)
        print(f"  gate by the Python mirror: {why}")
    same = float((candidate.argmax(-1) == baseline.argmax(-1)).mean())
    print(f"  {label} ({LAYERS} layers, {served} V-only calls, {len(targets)} rows): {verdict['verdict']}, "
          f"candidate KL {verdict.get('candidate_mean_kl')}, baseline KL {verdict.get('baseline_mean_kl')}, "
          f"upper bound {verdict.get('upper_bound')}, margin {verdict.get('margin')}; top-1 same as the baseline "
          f"{same:.4f}")
    return verdict["verdict"]


def teacher_forced(e4m3, power_of_two=False):
    model()
    label = f"kfv_teacher_{'e4m3' if e4m3 else 'bf16'}{'_pow2' if power_of_two else ''}_{LAYERS}"
    assert gate([_state["tokens"]], label, e4m3, PROMPT_TOKENS, CHUNK_TOKENS, power_of_two=power_of_two) == "ACCEPT"


def greedy(e4m3):
    """Greedy generation over the V-only cache against the K + V path, after each of GREEDY_PROMPTS
    prompts: the same tokens, or up to the first step where they part, where the V-only token must
    be a near tie in the K + V path's own logits of that step (within NEAR_TIE_LOGIT of its top
    logit: the contexts are the same up to there). The gate on the pooled decode rows (the V-only
    path's sequences fed token by token) must ACCEPT; at 60 layers 64 rows of one prompt left it
    INCONCLUSIVE for e4m3 (H200 2026-12-04: about 96 rows would decide), and so did 128 rows of two
    (about 136 would), hence three prompts."""
    m = model()
    kind = "e4m3" if e4m3 else "bf16"
    sequences = []
    for index in range(GREEDY_PROMPTS):
        prompt = _state["tokens"][index * GREEDY_PROMPT:(index + 1) * GREEDY_PROMPT]
        attention, cache = kv_path(e4m3)
        kv_tokens, kv_logits = hf_gemma4.greedy(m, prompt, NEW_TOKENS, attention, cache)
        before = hf_gemma4.k_from_v_calls()
        attention, cache = v_only_path(e4m3)
        v_tokens, _ = hf_gemma4.greedy(m, prompt, NEW_TOKENS, attention, cache)
        assert hf_gemma4.k_from_v_calls() > before, "no decode step ran over the V-only cache"
        first = next((i for i in range(NEW_TOKENS) if kv_tokens[i] != v_tokens[i]), None)
        if first is None:
            print(f"  prompt {index}: {NEW_TOKENS} greedy tokens ({kind}, {LAYERS} layers) identical")
        else:
            gap = (kv_logits[first].max() - kv_logits[first][v_tokens[first]]).item()
            print(f"  prompt {index}: {NEW_TOKENS} greedy tokens ({kind}, {LAYERS} layers) part at step {first}, the "
                  f"V-only token {gap:.3f} below the K + V path's top logit there")
            assert gap <= NEAR_TIE_LOGIT, (index, first, gap)
        sequences.append(torch.cat([prompt, v_tokens]))
    assert gate(sequences, f"kfv_greedy_{kind}_{LAYERS}", e4m3, GREEDY_PROMPT, 1, GREEDY_PROMPT) == "ACCEPT"


def test_teacher_forced_gate_accepts_v_only_bf16():
    teacher_forced(False)


def test_teacher_forced_gate_accepts_v_only_e4m3():
    teacher_forced(True)


def test_teacher_forced_gate_accepts_v_only_e4m3_power_of_two_scale():
    """The e4m3 V-only path with its scale rounded up to a power of two (v_only_cache(...,
    power_of_two_scale=True)), against the same K + V baseline."""
    teacher_forced(True, power_of_two=True)


def test_greedy_generation_over_v_only_bf16():
    greedy(False)


def test_greedy_generation_over_v_only_e4m3():
    greedy(True)


PADDED_PROMPTS = (200, 137)     # two prompts of a left-padded batch
PADDED_NEW_TOKENS = 16


def test_left_padded_batch_over_v_only_matches_each_row_alone():
    """generate() on a left-padded batch of two prompts over one V-only cache (its decode steps:
    the rows' real keys at their own positions, wideattn.transformers.v_only_rows) against each
    prompt alone over a V-only cache: the same greedy tokens, or parting at a near tie of the lone
    run's logits (its context is the same up to there)."""
    m = model()
    prompts = [_state["tokens"][:PADDED_PROMPTS[0]], _state["tokens"][1000:1000 + PADDED_PROMPTS[1]]]
    width = max(PADDED_PROMPTS)
    ids = torch.zeros((2, width), dtype=torch.long, device=prompts[0].device)
    mask = torch.zeros((2, width), dtype=torch.long, device=prompts[0].device)
    for row, prompt in enumerate(prompts):
        ids[row, width - prompt.shape[0]:] = prompt
        mask[row, width - prompt.shape[0]:] = 1
    m.set_attn_implementation("wideattn")
    before = hf_gemma4.k_from_v_calls()
    with torch.no_grad():
        batched = m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=PADDED_NEW_TOKENS,
                             min_new_tokens=PADDED_NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0,
                             past_key_values=v_only_cache.v_only_cache(m))
    assert hf_gemma4.k_from_v_calls() > before, "no decode step ran over the V-only cache"
    for row, prompt in enumerate(prompts):
        alone_tokens, alone_logits = hf_gemma4.greedy(m, prompt, PADDED_NEW_TOKENS, "wideattn",
                                                      v_only_cache.v_only_cache(m))
        tokens = batched[row, width:]
        first = next((i for i in range(PADDED_NEW_TOKENS) if tokens[i] != alone_tokens[i]), None)
        if first is None:
            print(f"  row {row} ({prompt.shape[0]} prompt tokens): {PADDED_NEW_TOKENS} tokens as the row alone")
            continue
        gap = (alone_logits[first].max() - alone_logits[first][tokens[first]]).item()
        print(f"  row {row}: parts from the row alone at step {first}, {gap:.3f} below its top logit there")
        assert gap <= NEAR_TIE_LOGIT, (row, first, gap)


def test_v_only_cache_halves_the_global_layers():
    m = model()
    tokens = torch.randint(0, m.config.vocab_size, (MEMORY_TOKENS,), generator=torch.Generator().manual_seed(1))
    tokens = tokens.cuda()
    layers = v_only_cache.k_from_v_layers(m.config)
    sizes = {}
    for name, cache in (("k_and_v", DynamicCache(config=m.config)), ("v_only", v_only_cache.v_only_cache(m))):
        m.set_attn_implementation("wideattn")
        with torch.no_grad():
            m(input_ids=tokens[None], past_key_values=cache, use_cache=True)
        sizes[name] = {"global_layers": v_only_cache.cache_bytes(cache, layers),
                       "all_layers": v_only_cache.cache_bytes(cache)}
        del cache
        torch.cuda.empty_cache()
    ratio = sizes["v_only"]["global_layers"] / sizes["k_and_v"]["global_layers"]
    report = {"tokens": MEMORY_TOKENS, "layers": LAYERS, "global_layers": layers, "bytes": sizes,
              "global_ratio": ratio, "all_ratio": sizes["v_only"]["all_layers"] / sizes["k_and_v"]["all_layers"]}
    with open(os.path.join(out_dir(), f"k_from_v_memory_{LAYERS}.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"  {MEMORY_TOKENS} tokens, {LAYERS} layers: global layers {sizes['v_only']['global_layers']} B V-only "
          f"against {sizes['k_and_v']['global_layers']} B K + V ({ratio:.4f}); whole cache {report['all_ratio']:.4f}")
    assert ratio == 0.5, ratio


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    harness.run(dict(globals()))
