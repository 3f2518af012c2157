"""test_transformers_gemma4.py - attn_implementation="wideattn" in transformers' own Gemma 4 code
on a GPU (run by tools/gpu/gpu_suite.sh; exits 77, skipped, without torch, CUDA or a transformers
with Gemma4ForCausalLM). The model: tools/bench/hf_gemma4.py (Gemma 4 31B's attention shapes,
12 layers, random peaked weights).

  - logits of a 2048-token forward: wideattn against the float32-attention reference through the
    gate (paired rule, margin 0.10 x the bf16 SDPA baseline's mean KL), SDPA in bf16 the baseline;
  - greedy generation of 64 tokens with the KV cache: wideattn's tokens equal SDPA's, or (where
    they part) the teacher-forced logits of the generated sequence pass the same gate;
  - greedy generation with plan reuse across decode steps (wideattn.transformers.set_decode_reuse)
    against the same generation without it: the same tokens, or parting only at a near tie;
  - continuous batching (generate_batch on "paged|wideattn") of 8 requests, on a model of global
    layers only (transformers' paged cache cannot hold Gemma 4's mixed layers: hf_gemma4.py):
    each request's tokens equal the request generated alone with wideattn, or (where they part:
    batched and single matmuls round differently) every batched token is within NEAR_TIE_LOGIT
    of the top logit of a teacher-forced forward of the batched sequence.
Every wideattn run also checks that its attention calls did reach the kernels.

usage: PYTHONPATH=build/python python3 tests/gpu/test_transformers_gemma4.py CLI [OUT_DIR]
       (CLI: the wideattn binary whose `accuracy gate` decides; OUT_DIR receives the gate JSON)
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))
import harness  # noqa: E402

harness.require_transformers_gemma4()
import torch  # noqa: E402

import e2e_drift  # noqa: E402
import hf_gemma4  # noqa: E402
import wideattn.transformers as wa_hf  # noqa: E402

PROMPT_TOKENS = 2048
NEW_TOKENS = 64
BATCH_REQUESTS = 8
BATCH_NEW_TOKENS = 32
BATCH_LAYERS = 4
NEAR_TIE_LOGIT = 0.25          # a batched token this close to the top logit is a rounding tie
MARGIN_REL = 0.10
CONFIDENCE = 0.95
MIN_TOP1 = 0.3                 # the weights must give peaked next-token distributions
SEED = 0

_state = {}


def model():
    if "model" not in _state:
        hf_gemma4.register_attention()
        _state["model"] = hf_gemma4.build_model(seed=SEED)
        vocab = _state["model"].config.vocab_size
        _state["prompt"] = torch.randint(0, vocab, (PROMPT_TOKENS,), generator=torch.Generator().manual_seed(SEED)).cuda()
    return _state["model"]


def served_calls(kind, function, *args):
    before = wa_hf.calls[kind]
    result = function(*args)
    ran = wa_hf.calls[kind] - before
    assert ran > 0, f"no {kind} attention call ran on wideattn"
    return result


def gate(tokens, label):
    """The paired gate on teacher-forced logits of `tokens` (CLI; its Python mirror otherwise)."""
    m = model()
    values = {name: hf_gemma4.logits(m, tokens, name).cpu().numpy()
              for name in (hf_gemma4.FP32_REFERENCE, "sdpa")}
    values["wideattn"] = served_calls("dense", hf_gemma4.logits, m, tokens, "wideattn").cpu().numpy()
    targets = tokens[1:].tolist() + [0]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="wideattn_hf_")
    dump_dir = tempfile.mkdtemp(prefix="wideattn_hf_dumps_")     # 256 MiB per dump: not in out_dir
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, array in values.items():
        paths[name] = os.path.join(dump_dir, f"{label}_{name}.h5")
        e2e_drift.write_dump(paths[name], array, targets, "transformers Gemma4ForCausalLM (random)", name, name)
    verdict, why = e2e_drift.run_cli_gate(sys.argv[1], paths[hf_gemma4.FP32_REFERENCE], paths["wideattn"],
                                          paths["sdpa"], os.path.join(out_dir, f"gate_{label}.json"), 0.0,
                                          MARGIN_REL, CONFIDENCE)
    if verdict is None:
        cand, _ = e2e_drift.kl_per_token(values[hf_gemma4.FP32_REFERENCE], values["wideattn"])
        base, _ = e2e_drift.kl_per_token(values[hf_gemma4.FP32_REFERENCE], values["sdpa"])
        verdict = e2e_drift.paired_gate(list(cand), list(base), 0.0, MARGIN_REL, CONFIDENCE)
        print(f"  gate by the Python mirror: {why}")
    print(f"  {label}: {verdict['verdict']}, candidate KL {verdict.get('candidate_mean_kl')}, "
          f"baseline KL {verdict.get('baseline_mean_kl')}, upper bound {verdict.get('upper_bound')}, "
          f"margin {verdict.get('margin')}")
    return verdict["verdict"]


def test_weights_are_peaked():
    top1, entropy = hf_gemma4.peakedness(hf_gemma4.logits(model(), _state["prompt"], hf_gemma4.FP32_REFERENCE))
    print(f"  mean top-1 probability {top1:.3f}, entropy {entropy:.3f} nats")
    assert top1 >= MIN_TOP1, top1


def test_logits_gate_accepts_wideattn():
    model()
    assert gate(_state["prompt"], "logits") == "ACCEPT"


def test_greedy_generation_matches_sdpa():
    m = model()
    prompt = _state["prompt"][:256]
    sdpa_tokens, _ = hf_gemma4.greedy(m, prompt, NEW_TOKENS, "sdpa")
    wa_tokens, _ = served_calls("dense", hf_gemma4.greedy, m, prompt, NEW_TOKENS, "wideattn")
    same = torch.equal(sdpa_tokens, wa_tokens)
    first = next((i for i in range(NEW_TOKENS) if sdpa_tokens[i] != wa_tokens[i]), None)
    print(f"  {NEW_TOKENS} greedy tokens {'identical' if same else f'part at step {first}'}")
    if not same:
        sequence = torch.cat([prompt, sdpa_tokens])
        assert gate(sequence, "generation") == "ACCEPT"


def test_decode_reuse_keeps_greedy_generation():
    """Plan reuse across decode steps (wideattn.transformers, on by default) against the same
    generation without it: its per-head decode calls ran, and the tokens are the same, or part
    only where the run without reuse had a near tie (its top logit within NEAR_TIE_LOGIT of the
    token reuse took: the rounded-up key count may choose another split count, which rounds
    differently)."""
    m = model()
    prompt = _state["prompt"][:256]
    previous = wa_hf.set_decode_reuse(False)
    try:
        off_tokens, off_logits = served_calls("dense", hf_gemma4.greedy, m, prompt, NEW_TOKENS, "wideattn")
        wa_hf.set_decode_reuse(True)
        calls, retries = wa_hf.decode_reuse["per_head_calls"], wa_hf.decode_reuse["exact_retries"]
        on_tokens, on_logits = served_calls("dense", hf_gemma4.greedy, m, prompt, NEW_TOKENS, "wideattn")
        calls = wa_hf.decode_reuse["per_head_calls"] - calls
        retries = wa_hf.decode_reuse["exact_retries"] - retries
    finally:
        wa_hf.set_decode_reuse(previous)
    assert calls > 0, "no decode step ran on the reuse path"
    first = next((i for i in range(NEW_TOKENS) if off_tokens[i] != on_tokens[i]), None)
    shared = NEW_TOKENS if first is None else first + 1
    spread = (on_logits[:shared] - off_logits[:shared]).abs().max().item()
    print(f"  {calls} per-head decode calls, {retries} exact-count retries; tokens "
          f"{'identical' if first is None else f'part at step {first}'}; largest logit difference "
          f"{spread:.3g} up to there")
    if first is not None:
        gap = (off_logits[first].max() - off_logits[first][on_tokens[first]]).item()
        assert gap <= NEAR_TIE_LOGIT, (first, gap)


def largest_greedy_gap(m, prompt, tokens, attention):
    """max over the steps of (top logit - logit of the token taken) in a teacher-forced forward."""
    sequence = torch.cat([prompt, torch.tensor(tokens, device=prompt.device)])
    steps = hf_gemma4.logits(m, sequence, attention)[prompt.shape[0] - 1:-1]
    taken = steps.gather(1, torch.tensor(tokens, device=steps.device)[:, None])[:, 0]
    return (steps.max(dim=-1).values - taken).max().item()


def test_continuous_batching_matches_single_requests():
    m = hf_gemma4.build_model(seed=SEED + 3, layers=BATCH_LAYERS, all_global=True)
    generator = torch.Generator().manual_seed(SEED + 2)
    lengths = torch.randint(20, 400, (BATCH_REQUESTS,), generator=generator).tolist()
    prompts = [torch.randint(0, m.config.vocab_size, (n,), generator=generator).cuda() for n in lengths]
    batched = served_calls("paged", hf_gemma4.generate_batch, m, prompts, BATCH_NEW_TOKENS, "wideattn")
    assert sorted(batched) == list(range(BATCH_REQUESTS)), sorted(batched)
    parted = 0
    for index, prompt in enumerate(prompts):
        assert len(batched[index]) == BATCH_NEW_TOKENS, (index, len(batched[index]))
        alone, _ = hf_gemma4.greedy(m, prompt, BATCH_NEW_TOKENS, "wideattn")
        if batched[index] != alone.tolist():
            parted += 1
            gap = largest_greedy_gap(m, prompt, batched[index], "wideattn")
            assert gap <= NEAR_TIE_LOGIT, (index, gap, batched[index], alone.tolist())
    print(f"  {BATCH_REQUESTS - parted} of {BATCH_REQUESTS} batched requests identical to single runs")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    harness.run(dict(globals()))
