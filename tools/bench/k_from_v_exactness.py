#!/usr/bin/env python3
"""k_from_v_exactness.py - does K rebuilt from the cached V match transformers' own K in Gemma 4's
global layers? Run on the GPU machine (torch with CUDA and transformers installed).

It builds transformers' Gemma4TextAttention for a global layer (full_attention, attention_k_eq_v)
at Gemma 4 31B's global-layer shapes (hidden 5376, 32 query heads, 4 KV heads of head dim 512;
tools/bench/hf_gemma4.py's config) with random bf16 weights and random k_norm weights (1 +
N(0, K_NORM_SPREAD^2)), and its Gemma4TextRotaryEmbedding ("proportional", partial_rotary_factor
0.25, theta 1e6: the config's defaults). It runs the layer (eager, no mask) on random hidden
states at windows of --tokens positions starting at each of --positions (up to 131071, 128k),
capturing transformers' own K (after k_norm and RoPE) and V from the layer's DynamicCache, and
K before RoPE from a hook on k_norm. Then it rebuilds K from V with a torch implementation of
exactly the formula the kernels use (include/wideattn.h, WIDEATTN_FLAG_K_FROM_V;
kernels/common/k_from_v.h):

    x        = bf16(V * w)                          (w = k_norm.weight as fp32)
    inv_freq = --inv-freq model (the default): the first 64 entries of transformers' own buffer
               (rotary.full_attention_inv_freq), what an engine passes in wideattn_k_from_v.inv_freq;
               --inv-freq formula: 1 / fp32(theta ^ (2i / 512)), i < 64 (the power in fp64 rounded
               once to fp32, the reciprocal in fp32), the library's frequencies when inv_freq is
               NULL; 0 for the 192 frequencies after, either way
    angle    = fp32(position * inv_freq)
    c, s     = bf16(cos(angle)), bf16(sin(angle))   (fp32 cos / sin on the GPU)
    K        = bf16(bf16(x * c) + bf16(rotate_half(x) * s)), rotate_half(x) = cat(-x[256:], x[:256])

and reports, per window (one row of the table; the JSON key in brackets):

    K max ulps [k.max_ulps]     the largest difference in bf16 ulps (the distance between the two
                                bf16 codes in the order of the values) of the rebuilt K from
                                transformers' K, over every element
    =1, =2, >2 [k.differ_*]     how many elements differ by 1, 2 and more ulps
    operand ulps [k_max_operand_ulps]
                                the largest difference in ulps of the larger of the element's two
                                products (max(|x c|, |rotate_half(x) s|)): where the sum cancels, a
                                one-ulp difference in x is many ulps of the small result, so this
                                says whether a strict excess comes from cancellation alone
    row ulps [k_max_row_ulps]   the largest difference in bf16 ulps of the largest |K| of its head
                                vector: per key and head, max_d |K_rebuilt - K_tf| / ulp(max_d |K_tf|)
    pre-RoPE max [k_before_rope.max_ulps]
                                the largest difference of K before RoPE (which isolates the one
                                rounding that K from V adds: V = bf16(n) is rounded before the
                                product with w, where transformers multiplies the fp32 n)
    cos/sin differ [cos_sin_bits_differ]
                                how many of transformers' bf16 cos / sin differ in bits from those
                                of the inv_freq used

and, once, how many entries of transformers' inv_freq buffer differ in bits from the formula's
[inv_freq_bits_differ]. The bar: --bar-ulps (default 2) on the measure --bar-on names: elements
(the default: every element within the bar, K max ulps), operand (operand ulps) or row (row ulps).
Exit status 0 when the bar holds, 1 when it does not, 2 when torch, transformers or a GPU is
missing or an argument is bad.

usage: k_from_v_exactness.py [--positions 0,1,4095,32768,65536,100000,131064] [--tokens 8]
       [--seed 0] [--inv-freq model|formula] [--bar-ulps 2] [--bar-on elements|operand|row]
       [--json FILE]

Example (the GPU machine): python3 tools/bench/k_from_v_exactness.py --json /tmp/k_from_v.json
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GLOBAL_LAYER = 5                 # layers 5, 11, ..., 59 are global in Gemma 4 31B
HIDDEN_31B = 5376
VOCAB = 1024                     # no embedding is built: any vocabulary will do
LAYERS = 6
HEAD_DIM = 512
ROPE_THETA = 1.0e6
ROTARY_DIMS = 128                # partial_rotary_factor 0.25 of 512
K_NORM_SPREAD = 0.25
HIDDEN_STD = 1.0
DEFAULT_POSITIONS = "0,1,4095,32768,65536,100000,131064"
DEFAULT_TOKENS = 8
DEFAULT_BAR_ULPS = 2
INV_FREQ_SOURCES = ("model", "formula")   # transformers' own buffer, or the theta formula
BAR_MEASURES = {"elements": "max_ulps", "operand": "max_operand_ulps", "row": "max_row_ulps"}
MAX_POSITIONS = 262144
BF16_SIGN = 0x8000
BF16_MAGNITUDE = 0x7FFF
BF16_MANTISSA_BITS = 7


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", default=DEFAULT_POSITIONS,
                        help="first positions of the windows, comma-separated (default %(default)s)")
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, help="tokens per window (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    parser.add_argument("--inv-freq", choices=INV_FREQ_SOURCES, default=INV_FREQ_SOURCES[0],
                        help="the rebuild's frequencies: transformers' own inv_freq buffer (model, what an "
                             "engine passes in wideattn_k_from_v.inv_freq) or the theta formula (formula, the "
                             "library's with inv_freq NULL) (default %(default)s)")
    parser.add_argument("--bar-ulps", type=int, default=DEFAULT_BAR_ULPS,
                        help="largest allowed difference in bf16 ulps (default %(default)s)")
    parser.add_argument("--bar-on", choices=tuple(BAR_MEASURES), default="elements",
                        help="the measure the bar applies to: every element's ulps, the ulps of its larger "
                             "product, or the ulps of its head vector's largest |K| (default %(default)s)")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args(argv)
    try:
        args.position_list = [int(p) for p in args.positions.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--positions: {args.positions!r} is not a comma-separated list of integers")
    if not args.position_list:
        parser.error("--positions: no position given")
    if args.tokens < 1:
        parser.error(f"--tokens: {args.tokens} must be >= 1")
    for p in args.position_list:
        if p < 0 or p + args.tokens > MAX_POSITIONS:
            parser.error(f"--positions: window {p}..{p + args.tokens - 1} is outside 0..{MAX_POSITIONS - 1}")
    if args.bar_ulps < 0:
        parser.error(f"--bar-ulps: {args.bar_ulps} must be >= 0")
    return args


def import_stack():
    """(torch, transformers' gemma4 modeling module), or None after a message saying what is missing."""
    try:
        import torch
        from transformers.models.gemma4 import modeling_gemma4
    except ImportError as error:
        print(f"k_from_v_exactness.py: needs torch and transformers with Gemma 4 (the GPU machine's "
              f"environment): {error}", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print("k_from_v_exactness.py: torch sees no CUDA device (run it on the GPU machine)", file=sys.stderr)
        return None
    return torch, modeling_gemma4


def build_layer(torch, modeling, seed):
    """transformers' global attention layer and rotary embedding at the 31B shapes, bf16 on the GPU."""
    import hf_gemma4
    config = hf_gemma4.build_config(layers=LAYERS, hidden=HIDDEN_31B, vocab=VOCAB)
    config.max_position_embeddings = MAX_POSITIONS
    config._attn_implementation = "eager"
    assert config.layer_types[GLOBAL_LAYER] == "full_attention", config.layer_types
    torch.manual_seed(seed)
    attention = modeling.Gemma4TextAttention(config, GLOBAL_LAYER).to(device="cuda", dtype=torch.bfloat16).eval()
    assert attention.v_proj is None and attention.head_dim == HEAD_DIM, "a global layer with K = V projection"
    with torch.no_grad():
        for linear in (attention.q_proj, attention.k_proj, attention.o_proj):
            linear.weight.normal_(0.0, HIDDEN_31B ** -0.5)
        attention.k_norm.weight.copy_(1.0 + K_NORM_SPREAD * torch.randn_like(attention.k_norm.weight.float()))
    rotary = modeling.Gemma4TextRotaryEmbedding(config).to("cuda")
    return config, attention, rotary


def cache_key_value(cache, layer):
    """The K and V a DynamicCache holds for `layer` (transformers 5: cache.layers; 4.x: key_cache)."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]


def transformers_kv(torch, config, attention, rotary, positions, seed):
    """transformers' K (after k_norm and RoPE), V and K before RoPE, [heads, tokens, dim], for hidden
    states at `positions`; and the bf16 cos / sin it used [tokens, dim]."""
    from transformers import DynamicCache
    generator = torch.Generator(device="cuda").manual_seed(seed + 1)
    hidden = (HIDDEN_STD * torch.randn((1, len(positions), config.hidden_size), generator=generator,
                                       device="cuda")).to(torch.bfloat16)
    position_ids = torch.tensor([positions], device="cuda")
    captured = {}
    hook = attention.k_norm.register_forward_hook(lambda module, args, out: captured.__setitem__("k_norm", out))
    try:
        cache = DynamicCache(config=config)
    except TypeError:
        cache = DynamicCache()
    with torch.no_grad():
        cos, sin = rotary(hidden, position_ids, "full_attention")
        attention(hidden_states=hidden, position_embeddings=(cos, sin), attention_mask=None, shared_kv_states={},
                  past_key_values=cache)
    hook.remove()
    keys, values = cache_key_value(cache, GLOBAL_LAYER)
    pre_rope = captured["k_norm"][0].transpose(0, 1)  # [tokens, heads, dim] -> [heads, tokens, dim]
    return keys[0], values[0], pre_rope, cos[0], sin[0]


def formula_inv_freq(torch):
    """The kernels' inv_freq (fp32 [256]): the fp64 power rounded to fp32, the fp32 reciprocal."""
    i = torch.arange(HEAD_DIM // 2, device="cuda")
    exponent = (2 * i).to(torch.float32) / HEAD_DIM
    theta = torch.tensor(ROPE_THETA, dtype=torch.float32).to(device="cuda", dtype=torch.float64)  # fp32 theta
    power = torch.pow(theta, exponent.double()).to(torch.float32)
    inv = torch.reciprocal(power)
    return torch.where(2 * i < ROTARY_DIMS, inv, torch.zeros_like(inv))


def model_inv_freq(torch, rotary):
    """The table an engine passes in wideattn_k_from_v.inv_freq, as the kernels use it (fp32 [256]):
    the first ROTARY_DIMS / 2 entries of transformers' own buffer, 0 for the frequencies after."""
    buffer = rotary.full_attention_inv_freq.to("cuda").float()
    table = torch.zeros(HEAD_DIM // 2, dtype=torch.float32, device="cuda")
    table[:ROTARY_DIMS // 2] = buffer[:ROTARY_DIMS // 2]
    return table


def formula_cos_sin(torch, positions, inv_freq):
    """bf16 cos and sin [tokens, 256] of the kernels' angles fp32(position * inv_freq)."""
    angle = torch.tensor(positions, device="cuda").to(torch.float32)[:, None] * inv_freq[None, :]
    return torch.cos(angle).to(torch.bfloat16), torch.sin(angle).to(torch.bfloat16)


def rebuild_k(torch, values, weight, positions, inv_freq):
    """K from V [heads, tokens, 512] with the kernels' formula, every step a bf16 tensor operation."""
    half = HEAD_DIM // 2
    x = (values.float() * weight.float()).to(torch.bfloat16)
    c, s = formula_cos_sin(torch, positions, inv_freq)
    c, s = torch.cat((c, c), dim=-1)[None], torch.cat((s, s), dim=-1)[None]
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * c) + (rotated * s)


def ulp_distance(torch, a, b):
    """|a - b| in bf16 ulps: the distance of the two codes in the order of their values."""
    def ordered(t):
        bits = t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
        magnitude = bits & BF16_MAGNITUDE
        return torch.where((bits & BF16_SIGN) != 0, -magnitude, magnitude)
    return (ordered(a) - ordered(b)).abs()


def bf16_ulp(torch, magnitude):
    """The bf16 ulp at each |value| (zeros count as bf16's smallest normal)."""
    scale = magnitude.clamp_min(torch.finfo(torch.bfloat16).tiny)
    return torch.exp2(torch.floor(torch.log2(scale)) - BF16_MANTISSA_BITS)


def operand_ulps(torch, rebuilt, keys, values, weight, positions, inv_freq):
    """The largest |rebuilt - keys| in bf16 ulps of max(|x c|, |rotate_half(x) s|) per element."""
    half = HEAD_DIM // 2
    x = (values.float() * weight.float()).to(torch.bfloat16).float()
    c, s = formula_cos_sin(torch, positions, inv_freq)
    c, s = torch.cat((c, c), dim=-1)[None].float(), torch.cat((s, s), dim=-1)[None].float()
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    ulp = bf16_ulp(torch, torch.maximum((x * c).abs(), (rotated * s).abs()))
    return float(((rebuilt.float() - keys.float()).abs() / ulp).max().item())


def row_ulps(torch, rebuilt, keys):
    """The largest max_d |rebuilt - keys| / ulp(max_d |keys|) over the head vectors [heads, tokens]."""
    worst = (rebuilt.float() - keys.float()).abs().amax(dim=-1)
    ulp = bf16_ulp(torch, keys.float().abs().amax(dim=-1))
    return float((worst / ulp).max().item())


def summary(distance):
    """The largest ulp distance and how many elements differ by 1, 2 and more."""
    return {"max_ulps": int(distance.max().item()), "elements": int(distance.numel()),
            "differ_1": int((distance == 1).sum().item()), "differ_2": int((distance == 2).sum().item()),
            "differ_more": int((distance > 2).sum().item())}


def run(args, torch, modeling):
    torch.backends.cuda.matmul.allow_tf32 = False  # the rotary (inv_freq @ positions) must stay fp32
    torch.set_float32_matmul_precision("highest")
    config, attention, rotary = build_layer(torch, modeling, args.seed)
    weight = attention.k_norm.weight.detach()
    inv_freq_bits_differ = int((rotary.full_attention_inv_freq.to("cuda").float().view(torch.int32) !=
                                formula_inv_freq(torch).view(torch.int32)).sum().item())
    inv_freq = model_inv_freq(torch, rotary) if args.inv_freq == "model" else formula_inv_freq(torch)
    rows = []
    for first in args.position_list:
        positions = list(range(first, first + args.tokens))
        keys, values, pre_rope, cos, sin = transformers_kv(torch, config, attention, rotary, positions,
                                                           args.seed + first)
        rebuilt = rebuild_k(torch, values, weight, positions, inv_freq)
        scaled = (values.float() * weight.float()).to(torch.bfloat16)
        c, s = formula_cos_sin(torch, positions, inv_freq)
        cos_sin_differ = int(((cos[:, :HEAD_DIM // 2] != c) | (sin[:, :HEAD_DIM // 2] != s)).sum().item())
        rows.append({"first_position": first, "tokens": args.tokens,
                     "k": summary(ulp_distance(torch, rebuilt, keys)),
                     "k_max_operand_ulps": operand_ulps(torch, rebuilt, keys, values, weight, positions, inv_freq),
                     "k_max_row_ulps": row_ulps(torch, rebuilt, keys),
                     "k_before_rope": summary(ulp_distance(torch, scaled, pre_rope)),
                     "cos_sin_bits_differ": cos_sin_differ})
    measures = {"max_ulps": max(row["k"]["max_ulps"] for row in rows),
                "max_operand_ulps": max(row["k_max_operand_ulps"] for row in rows),
                "max_row_ulps": max(row["k_max_row_ulps"] for row in rows)}
    measured = measures[BAR_MEASURES[args.bar_on]]
    return {"tool": "k_from_v_exactness.py", "shape": {"hidden": HIDDEN_31B, "num_q_heads": config.num_attention_heads,
                                                       "num_kv_heads": attention.k_proj.out_features // HEAD_DIM,
                                                       "head_dim": HEAD_DIM, "rope_theta": ROPE_THETA,
                                                       "rotary_dims": ROTARY_DIMS},
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
            "inv_freq": args.inv_freq, "inv_freq_bits_differ": inv_freq_bits_differ, "windows": rows, **measures,
            "bar_ulps": args.bar_ulps, "bar_on": args.bar_on, "pass": measured <= args.bar_ulps}


def print_report(report):
    print(f"K from V against transformers' K on {report['gpu']} (torch {report['torch']}), inv_freq from the "
          f"{report['inv_freq']}: transformers' inv_freq bits differing from the formula's: "
          f"{report['inv_freq_bits_differ']} of {HEAD_DIM // 2}")
    print(f"{'positions':>17} {'K max ulps':>10} {'=1':>7} {'=2':>7} {'>2':>5} {'operand ulps':>12} "
          f"{'row ulps':>8} {'pre-RoPE max':>12} {'cos/sin differ':>14}")
    for row in report["windows"]:
        k, pre = row["k"], row["k_before_rope"]
        span = f"{row['first_position']}..{row['first_position'] + row['tokens'] - 1}"
        print(f"{span:>17} {k['max_ulps']:>10} {k['differ_1']:>7} {k['differ_2']:>7} {k['differ_more']:>5} "
              f"{row['k_max_operand_ulps']:>12.2f} {row['k_max_row_ulps']:>8.2f} {pre['max_ulps']:>12} "
              f"{row['cos_sin_bits_differ']:>14}")
    verdict = "PASS" if report["pass"] else "FAIL"
    measured = report[BAR_MEASURES[report["bar_on"]]]
    print(f"{verdict}: largest difference on {report['bar_on']} {measured:g} bf16 ulps (bar {report['bar_ulps']}); "
          f"elements {report['max_ulps']}, operand {report['max_operand_ulps']:.2f}, "
          f"row {report['max_row_ulps']:.2f}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    stack = import_stack()
    if stack is None:
        return 2
    report = run(args, *stack)
    print_report(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
