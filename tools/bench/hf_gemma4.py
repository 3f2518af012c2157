"""hf_gemma4.py - transformers' own Gemma 4 code (Gemma4ForCausalLM) with Gemma 4 31B's attention
shapes and random, peaked weights, for the end-to-end runs on the GPU machine
(tools/bench/e2e_drift.py --model transformers-gemma4, tests/gpu/test_transformers_gemma4.py).

Attention shapes (docs/design.md section 1): 32 query heads; sliding layers 16 KV heads of 256,
window 1024; global layers (every 6th) 4 KV heads of 512 with K and V from one projection
(attention_k_eq_v); scale 1.0; final logit softcap 30. No weights download: weights are
transformers' init, then QK-norm weights set so attention scores have a standard deviation of
about SCORE_STD, and LM-head rows drawn as in e2e_drift.py's model (log-normal row scales) so the
next-token distributions are peaked (the run prints the mean top-1 probability and entropy).

Attention implementations (registered with transformers): "wideattn" (wideattn.transformers:
the 512-dim layers on the kernels, the others on SDPA), "sdpa" (bf16, the baseline),
FP32_REFERENCE (every layer's attention in float32 through transformers' SDPA function), and
E4M3_ATTENTION (the 512-dim layers on the library's 8-bit path: each call's K and V quantised
with one scale each into an e4m3 cache of E4M3_BLOCK_SIZE-slot pages, V in the transposed layout
of WIDEATTN_FLAG_V_TRANSPOSED, bf16 Q; the dispatcher's kernel for it; the others on SDPA; for
the 8-bit gate of run_e2e, which runs one teacher-forced sequence per forward).

Continuous batching (generate_batch) runs on a model of global layers only (build_model(...,
all_global=True)): transformers' PagedAttentionCache sizes every layer's pages from the config's
global head_dim and num_key_value_heads (generation/continuous_batching/cache.py, find_head_dim;
checked at 5.16.0.dev0, commit 3cd1a2307acd), and since transformers 5.15 reading those from a
config whose layers differ raises AmbiguousGlobalPerLayerAttributeError, so Gemma 4's mixed
256/512-dim layers cannot be batched there.
"""

import math

NUM_Q_HEADS = 32
SLIDING_KV_HEADS = 16
SLIDING_HEAD_DIM = 256
GLOBAL_KV_HEADS = 4
GLOBAL_HEAD_DIM = 512
SLIDING_WINDOW = 1024
GLOBAL_EVERY = 6
FINAL_SOFTCAP = 30.0
SCORE_STD = 2.0                  # std of q.k (scale 1.0) after QK-norm
LOGIT_STD = 5.5                  # as e2e_drift.py's DEFAULT_LOGIT_STD
LM_ROW_LOG_STD = 0.5
DEFAULT_LAYERS = 12
DEFAULT_HIDDEN = 2048
DEFAULT_VOCAB = 32768
FP32_REFERENCE = "wideattn_fp32_reference"
E4M3_ATTENTION = "wideattn_e4m3"
E4M3_BLOCK_SIZE = 16             # slots per page of E4M3_ATTENTION's cache (the row-box page size)
e4m3_calls = {"served": 0}       # E4M3_ATTENTION calls that ran on the 8-bit path


def build_config(layers=DEFAULT_LAYERS, hidden=DEFAULT_HIDDEN, vocab=DEFAULT_VOCAB, all_global=False):
    """Gemma4TextConfig with Gemma 4 31B's attention shapes; all_global: every layer a global one,
    with the global shapes also as the config's head_dim / num_key_value_heads (a uniform
    model: transformers drops per-layer values equal to the global ones)."""
    from transformers import Gemma4TextConfig
    layer_types = ["full_attention" if all_global or (i + 1) % GLOBAL_EVERY == 0 else "sliding_attention"
                   for i in range(layers)]
    layer_types[-1] = "full_attention"
    kv_heads, head_dim = (GLOBAL_KV_HEADS, GLOBAL_HEAD_DIM) if all_global else (SLIDING_KV_HEADS, SLIDING_HEAD_DIM)
    return Gemma4TextConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
        num_attention_heads=NUM_Q_HEADS, num_key_value_heads=kv_heads, head_dim=head_dim,
        global_head_dim=GLOBAL_HEAD_DIM, num_global_key_value_heads=GLOBAL_KV_HEADS, attention_k_eq_v=True,
        sliding_window=SLIDING_WINDOW, layer_types=layer_types, final_logit_softcapping=FINAL_SOFTCAP,
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, enable_moe_block=False,
        tie_word_embeddings=False, max_position_embeddings=32768)


def check_shapes(model):
    """The built layers have the intended attention shapes (config keys differ across versions)."""
    layers = model.model.layers
    for layer in layers:
        attn = layer.self_attn
        sliding = attn.layer_type == "sliding_attention"
        head_dim = SLIDING_HEAD_DIM if sliding else GLOBAL_HEAD_DIM
        kv_heads = SLIDING_KV_HEADS if sliding else GLOBAL_KV_HEADS
        assert attn.head_dim == head_dim, (attn.layer_idx, attn.head_dim)
        assert attn.q_proj.out_features == NUM_Q_HEADS * head_dim
        assert attn.k_proj.out_features == kv_heads * head_dim, (attn.layer_idx, attn.k_proj.out_features)
        assert (attn.v_proj is None) == (not sliding), "global layers take V from the K projection"
        assert attn.scaling == 1.0
    assert any(layer.self_attn.layer_type == "full_attention" for layer in layers)


def build_model(seed=0, device="cuda", **config_args):
    import torch
    from transformers import Gemma4ForCausalLM
    torch.manual_seed(seed)
    config = build_config(**config_args)
    model = Gemma4ForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    check_shapes(model)
    generator = torch.Generator(device="cpu").manual_seed(seed + 1)
    with torch.no_grad():
        for layer in model.model.layers:
            attn = layer.self_attn
            weight = math.sqrt(SCORE_STD / math.sqrt(attn.head_dim))
            attn.q_norm.weight.fill_(weight)
            attn.k_norm.weight.fill_(weight)
        hidden = config.hidden_size
        rows = torch.randn((config.vocab_size, hidden), generator=generator) / math.sqrt(hidden)
        row_scale = torch.exp(LM_ROW_LOG_STD * torch.randn((config.vocab_size, 1), generator=generator))
        row_scale = row_scale / row_scale.pow(2).mean().sqrt()
        model.lm_head.weight.copy_((rows * row_scale * LOGIT_STD).to(model.lm_head.weight))
    return model


def register_attention():
    """wideattn (and paged|wideattn) plus the float32 reference, each with the SDPA mask format."""
    import torch
    import wideattn.transformers
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def fp32_attention(module, query, key, value, attention_mask, **kwargs):
        mask = attention_mask
        if mask is not None and mask.dtype.is_floating_point:
            mask = mask.float()
        out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), mask, **kwargs)
        return out.to(query.dtype), weights

    wideattn.transformers.register()
    AttentionInterface.register(FP32_REFERENCE, fp32_attention)
    AttentionMaskInterface.register(FP32_REFERENCE, sdpa_mask)
    AttentionInterface.register(E4M3_ATTENTION, e4m3_attention)
    AttentionMaskInterface.register(E4M3_ATTENTION, sdpa_mask)
    return torch


def e4m3_attention(module, query, key, value, attention_mask, **kwargs):
    """E4M3_ATTENTION: a 512-dim layer's call on the 8-bit path (module docstring), any other on
    transformers' SDPA. Serves causal calls of one sequence (batch 1, no padding: run_e2e's
    teacher-forced forwards, the chunks of chunked_logits over a DynamicCache, the queries the last
    of the keys) and raises NotImplementedError for any other, so a gate never runs on a call it
    did not mean to."""
    import torch
    import wideattn
    batch, q_heads, q_len, head_dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    if head_dim != GLOBAL_HEAD_DIM:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if batch != 1 or q_len > kv_len or kwargs.get("sliding_window"):
        raise NotImplementedError(f"{E4M3_ATTENTION}: serves one causal sequence (batch 1, the queries the "
                                  f"last of the keys), not batch {batch}, {q_len} queries over "
                                  f"{kv_len} keys, sliding_window {kwargs.get('sliding_window')}")
    scaling = kwargs.get("scaling")
    scaling = float(scaling) if scaling is not None else head_dim ** -0.5
    device = query.device
    k = key[0].transpose(0, 1).contiguous()      # [S, Hkv, D] bf16
    v = value[0].transpose(0, 1).contiguous()
    blocks = -(-kv_len // E4M3_BLOCK_SIZE)
    k_cache = torch.empty((blocks, E4M3_BLOCK_SIZE, kv_heads, head_dim), dtype=torch.uint8, device=device)
    v_cache = torch.empty((blocks, kv_heads, head_dim, E4M3_BLOCK_SIZE), dtype=torch.uint8, device=device)
    slots = torch.arange(kv_len, dtype=torch.int64, device=device)
    k_scale = wideattn.compute_scale(k)
    v_scale = wideattn.compute_scale(v)
    wideattn.quantize_to_cache(k, k_cache, slots, k_scale)
    wideattn.quantize_to_cache(v, v_cache, slots, v_scale, v_transposed=True)
    q = query[0].transpose(0, 1).contiguous()    # [T, Hq, D]
    cu_seqlens_q = torch.tensor([0, q_len], dtype=torch.int32, device=device)
    seq_lens_k = torch.tensor([kv_len], dtype=torch.int32, device=device)
    block_table = torch.arange(blocks, dtype=torch.int32, device=device).reshape(1, blocks)
    out = wideattn.prefill(q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, scaling, k_scale=k_scale,
                           v_scale=v_scale, max_seqlen_q=q_len, max_seqlen_k=kv_len, v_transposed=True)
    e4m3_calls["served"] += 1
    return out.reshape(1, q_len, q_heads, head_dim), None


def round_model_e4m3(model, e2e):
    """A copy of `model` whose decoder layers' linear weights are rounded to e4m3 with one scale
    per output channel (e2e_drift.py's round_weight_per_channel, as its own model's e4m3 copy);
    returns (copy, mean relative RMS rounding error of those weights)."""
    import copy
    import torch
    rounded = copy.deepcopy(model)
    errors = []
    with torch.no_grad():
        for module in rounded.model.layers.modules():
            if isinstance(module, torch.nn.Linear):
                w = module.weight
                r = e2e.round_weight_per_channel(w).to(w.dtype)
                errors.append(((r.float() - w.float()).norm() / w.float().norm()).item())
                w.copy_(r)
    return rounded, sum(errors) / len(errors)


def logits(model, tokens, attention):
    """float32 logits [tokens, vocab] of one teacher-forced forward with `attention`."""
    import torch
    model.set_attn_implementation(attention)
    with torch.no_grad():
        return model(input_ids=tokens[None]).logits[0].float()


def chunked_logits(model, tokens, attention, cache, first, chunk):
    """float32 logits [tokens, vocab] of a teacher-forced run in pieces over `cache` (a
    transformers cache, e.g. DynamicCache(config=...) or wideattn.v_only_cache.v_only_cache(model)):
    the first `first` tokens as one forward, then `chunk` tokens per forward (1: token by token,
    as decode steps), each over the cache the earlier ones filled."""
    import torch
    model.set_attn_implementation(attention)
    parts = []
    with torch.no_grad():
        begin = 0
        while begin < tokens.shape[0]:
            end = min(tokens.shape[0], first if begin == 0 else begin + chunk)
            out = model(input_ids=tokens[None, begin:end], past_key_values=cache, use_cache=True)
            parts.append(out.logits[0].float())
            begin = end
    return torch.cat(parts)


def k_from_v_calls():
    """Calls that ran over a V-only cache layer since import (wideattn.transformers.calls)."""
    import wideattn.transformers
    return wideattn.transformers.calls["k_from_v"]


def peakedness(values):
    """(mean top-1 probability, mean entropy in nats) of logits rows."""
    import torch
    probs = torch.softmax(values.double(), dim=-1)
    entropy = -(probs * torch.log(probs.clamp_min(1e-300))).sum(-1)
    return probs.max(-1).values.mean().item(), entropy.mean().item()


def greedy(model, prompt, new_tokens, attention, cache=None):
    """Greedy generation with transformers' KV cache (`cache`: a cache object to fill, e.g.
    wideattn.v_only_cache.v_only_cache(model); None: generate's own): (generated token ids,
    per-step logits)."""
    import torch
    model.set_attn_implementation(attention)
    extra = {} if cache is None else {"past_key_values": cache}
    with torch.no_grad():
        result = model.generate(input_ids=prompt[None], max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                do_sample=False, return_dict_in_generate=True, output_logits=True,
                                eos_token_id=None, pad_token_id=0, **extra)
    generated = result.sequences[0, prompt.shape[0]:]
    return generated, torch.stack([step[0].float() for step in result.logits])


def generate_batch(model, prompts, new_tokens, attention):
    """Continuous batching (generate_batch) of several prompts on "paged|" + attention: {index:
    generated ids}. The paged name is set here: given a plain name, generate_batch switches a
    model that supports flash attention to paged|flash_attention_* where flash-attn is installed
    (continuous_api.py, switch_to_cb_friendly_attn). No EOS (-1 in continuous batching), so every
    request runs new_tokens steps; continuous batching drops min_new_tokens' processor."""
    import torch
    from transformers import GenerationConfig
    import wideattn.transformers
    paged = attention if attention.startswith(wideattn.transformers.PAGED_PREFIX) \
        else wideattn.transformers.PAGED_PREFIX + attention
    model.set_attn_implementation(paged)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        outputs = model.generate_batch(inputs=[p.tolist() for p in prompts], generation_config=config,
                                       progress_bar=False)
    by_prompt = {}
    for output in outputs.values():
        prompt_ids = list(output.prompt_ids)
        index = next(i for i, p in enumerate(prompts) if p.tolist() == prompt_ids)
        by_prompt[index] = list(output.generated_tokens)
    return by_prompt


def gated_logits(model, inputs, seq_lens, attentions):
    """{attention: float32 numpy logits [tokens, vocab]} of each sequence run alone (B = 1)."""
    import numpy as np
    import torch
    out = {name: [] for name in attentions}
    begin = 0
    for length in seq_lens:
        tokens = torch.tensor(inputs[begin:begin + length], device="cuda")
        begin += length
        for name in attentions:
            out[name].append(logits(model, tokens, name).cpu().numpy())
    return {name: np.concatenate(parts) for name, parts in out.items()}


def run_e2e(args, e2e):
    """tools/bench/e2e_drift.py --model transformers-gemma4: logit dumps of three variants through
    transformers' Gemma4ForCausalLM and the paired gate (CLI; the Python mirror where the CLI
    cannot run). bf16 (default): the float32-attention reference, the bf16 SDPA baseline, the
    wideattn candidate. --hf-e4m3: the same reference; the baseline is SDPA on a copy of the model
    whose linear weights are rounded to e4m3 (round_model_e4m3), the candidate E4M3_ATTENTION on
    that copy, so the margin is a tenth of the drift e4m3 weights cause (e2e_drift.py's rule for
    its own model). Exit status: 0 ACCEPT, 1 REJECT, 4 INCONCLUSIVE, 2 error."""
    import json
    import os
    import wideattn
    wideattn.configure(bundle=args.bundle, library=args.lib)
    register_attention()
    model = build_model(seed=args.seed, vocab=args.vocab, hidden=args.hidden,
                        layers=max(args.layers, GLOBAL_EVERY))
    seq_lens = list(args.config.seq_lens)
    inputs, targets = e2e.make_tokens(seq_lens, args.vocab, args.seed)
    summary = {"model": "transformers-gemma4", "layers": len(model.model.layers), "tokens": len(targets),
               "commit": args.commit, "attention": "e4m3" if args.hf_e4m3 else "bf16"}
    if args.hf_e4m3:
        model8, weight_err = round_model_e4m3(model, e2e)
        summary["weight_rounding_rel_rms"] = weight_err
        print(f"e4m3 per-channel weight rounding: mean relative RMS error {weight_err:.4f}", flush=True)
        variants = {"reference": (model, FP32_REFERENCE), "baseline": (model8, "sdpa"),
                    "candidate": (model8, E4M3_ATTENTION)}
    else:
        variants = {"reference": (model, FP32_REFERENCE), "baseline": (model, "sdpa"),
                    "candidate": (model, wideattn.transformers.NAME)}
    before_dense, before_e4m3 = wideattn.transformers.calls.get("dense", 0), e4m3_calls["served"]
    values = {label: gated_logits(m, inputs, seq_lens, [attention])[attention]
              for label, (m, attention) in variants.items()}
    served = (e4m3_calls["served"] - before_e4m3 if args.hf_e4m3
              else wideattn.transformers.calls["dense"] - before_dense)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.dump_dir, exist_ok=True)
    paths = {}
    for label, (_, attention) in variants.items():
        paths[label] = os.path.join(args.dump_dir, f"hf_gemma4_{label}.h5")
        e2e.write_dump(paths[label], values[label], targets, "transformers Gemma4ForCausalLM (random)",
                       label, attention)
    top1, entropy = peakedness(__import__("torch").from_numpy(values["reference"]))
    summary.update({"served_calls": served, "reference_top1": top1, "reference_entropy": entropy})
    print(f"reference: mean top-1 probability {top1:.3f}, entropy {entropy:.3f} nats; "
          f"{served} attention calls ran on wideattn", flush=True)
    verdict, why = e2e.run_cli_gate(args.cli, paths["reference"], paths["candidate"], paths["baseline"],
                                    os.path.join(args.out, "gate_hf_gemma4.json"), args.margin, args.margin_rel,
                                    args.confidence)
    if verdict is None:
        cand_kl, _ = e2e.kl_per_token(values["reference"], values["candidate"])
        base_kl, _ = e2e.kl_per_token(values["reference"], values["baseline"])
        verdict = e2e.paired_gate(list(cand_kl), list(base_kl), args.margin, args.margin_rel, args.confidence)
        verdict["decided_by"] = f"Python mirror ({why})"
    summary["gate"] = verdict
    with open(os.path.join(args.out, "e2e_summary.json"), "w") as f:
        json.dump(summary, f, indent=2, default=str)
    print(f"gate: {verdict['verdict']} (mean difference {verdict.get('mean_difference')}, "
          f"upper bound {verdict.get('upper_bound')}, margin {verdict.get('margin')})", flush=True)
    if served == 0:
        print("ERROR: no attention call ran on wideattn", flush=True)
        return 2
    return {"ACCEPT": 0, "REJECT": 1, "INCONCLUSIVE": 4}.get(verdict["verdict"], 2)
