#!/usr/bin/env python3
"""gemma4_generation.py - what users of transformers feel: Gemma 4 (transformers' own
Gemma4ForCausalLM, random weights) in eager mode, batch 1, greedy decoding, with
attn_implementation="wideattn" against "sdpa", on the GPU machine:
  ttft_8k         time to first token of an 8192-token prompt: one forward of the prompt into an
                  empty DynamicCache plus the argmax of the last logits, synchronised
  decode_8k       one greedy decode step (forward of one token, argmax) at 8192 tokens of context
  decode_32k      the same at 32768 tokens of context
  decode_8k_padded  decode_8k with a left-padded prompt (its first PADDED_TOKENS tokens masked
                  out by the 2-D attention_mask, which grows by one per step as generate's does):
                  transformers then builds a 4-D mask every step, which wideattn.transformers
                  verifies on the host (module docstring, "Masks")
The context of a decode case is filled in chunks of PREFILL_CHUNK tokens (SDPA's math path at
head dim 512 would need a 32k x 32k score matrix per head for one 32k forward); each decode case
reports the median over --steps timed steps after --warmup steps, each step synchronised (host
and device time together, as a generation loop sees it); TTFT the median of --reps prompts.

--host-parts (decode cases): where a step's host time goes, per attention and round: the host
part of the step (until the forward and the argmax have been issued) and the wait for the GPU
after it (medians over the timed steps), and the mean host time a step spends inside
transformers' attention functions (the global layers and the sliding ones apart) and its mask
functions, by timing wrappers registered in transformers' AttentionInterface and
AttentionMaskInterface for the run (an attention call made from inside another, such as
wideattn's hand-over of a sliding layer to SDPA, counts once, in the outer one). The wrappers add
a few microseconds a call to both attentions alike.

--interleave (decode cases): one context per round, then every timed step of it alternates the
attentions (each --steps round runs each attention for one step, the order reversed every other
round, after --warmup steps of each), so that the host's drift, which moves a step by tens of
percent from minute to minute, falls on both alike; the report adds, per case, the paired ratio of
the first two --attention names: the median of the per-round ratios of their step times (> 1: the
first named is faster), its 95% bootstrap interval over the rounds, and the rounds the first named
won (--rounds: that many contexts, their rounds pooled). The decode bar against SDPA is then "met" when the interval lies above 1,
"MISSED" when it lies below, "undecided" otherwise. Not with --host-parts.

--kernel-times (decode cases): where a step's GPU time goes, per attention: one context each,
--warmup steps, then --steps steps under torch.profiler (device activity only); per attention
the device time of a step (every kernel, copy and fill summed) and the KERNEL_ROWS kernels of
most time a step, then the kernels whose time a step differs most between the first two
--attention names. Step times are not reported in this mode (the profiler adds to them). Not with
--host-parts or --interleave.

Configs (--config): "12" is 12 layers of hidden 2048, vocab 32768 (tools/bench/hf_gemma4.py's
test model: layers 6 and 12 global); "31b" is Gemma 4 31B's shape: 60 layers (10 global: every
6th), hidden 5376, intermediate 21504, vocab 262144, about 31e9 parameters (62 GB of bf16
weights, built on the device; the 32k-context case needs its KV cache on top). Both have the 31B
attention shapes (32 query heads; sliding: 16 KV heads of 256, window 1024; global: 4 KV heads of
512, K = V projection).

Attentions (--attention, run in the order given, --rounds times alternated per case):
"wideattn", "sdpa", and "wideattn-per-step": wideattn with
wideattn.transformers.set_mask_check("per_step"), the earlier mask rule (every mask verified at
the first served layer of each step), to time the two rules side by side.

Plan reuse across decode steps (wideattn.transformers, on by default, off by
$WIDEATTN_DECODE_REUSE=0) is whatever the environment sets: the report's "decode_reuse" says
whether it was on and counts the per-head calls it served and the exact-count retries it made
during the run (null for a package from before plan reuse, such as a94d5f9's, which has neither
it nor the mask rules: "wideattn-per-step" is refused there).

The wideattn package is whatever `import wideattn` finds (PYTHONPATH): to compare builds, e.g.
this one against main's a94d5f9 integration, run the script once per build with --label and
--json, then --compare the reports:

  PYTHONPATH=build/python python3 tools/bench/gemma4_generation.py --config 12 --label plan-run \\
      --json /tmp/g4_plan.json
  PYTHONPATH=/path/to/a94d5f9/build/python python3 tools/bench/gemma4_generation.py --config 12 \\
      --label a94d5f9 --json /tmp/g4_main.json
  python3 tools/bench/gemma4_generation.py --compare /tmp/g4_plan.json /tmp/g4_main.json

Bars (H200, batch 1, eager): decode_8k faster with "wideattn" than with "sdpa" and
>= 1.3x faster than with main's a94d5f9 integration; ttft_8k >= 2x faster with "wideattn" than
with "sdpa". The run prints the ratios of one report (wideattn vs sdpa); --compare prints those
between reports. Results go into BENCHMARKS.md by hand, with the commit and date.

usage: gemma4_generation.py [--config 12|31b] [--cases ttft_8k,decode_8k,decode_32k,decode_8k_padded]
       [--attention wideattn,sdpa,wideattn-per-step] [--rounds N] [--steps N] [--warmup N] [--reps N]
       [--label TEXT] [--json FILE] [--host-parts | --interleave | --kernel-times]
       gemma4_generation.py --compare NEW.json OLD.json
       gemma4_generation.py --self-test   (the paired statistics and the kernel tables, no GPU)
"""

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CONFIGS = {
    "12": {"layers": 12, "hidden": 2048, "intermediate": 8192, "vocab": 32768},
    "31b": {"layers": 60, "hidden": 5376, "intermediate": 21504, "vocab": 262144},
}
CASES = {"ttft_8k": ("ttft", 8192), "decode_8k": ("decode", 8192), "decode_32k": ("decode", 32768),
         "decode_8k_padded": ("decode_padded", 8192)}
PREFILL_CHUNK = 2048
PADDED_TOKENS = 8
# --attention names: (transformers' attn_implementation, wideattn.transformers.set_mask_check mode).
ATTENTIONS = {"wideattn": ("wideattn", "auto"), "wideattn-per-step": ("wideattn", "per_step"), "sdpa": ("sdpa", None)}
DECODE_BAR_VS_SDPA = 1.0
BOOTSTRAP_RESAMPLES = 2000   # --interleave: resamples of the rounds for the ratio's 95% interval
BOOTSTRAP_SEED = 1
INTERVAL = 0.95
DECODE_BAR_VS_MAIN = 1.3
KERNEL_ROWS = 15          # --kernel-times: kernels listed per attention
KERNEL_DIFF_ROWS = 20     # --kernel-times: kernels listed by their difference between two attentions
KERNEL_NAME_CHARS = 100   # --kernel-times: a kernel name's characters printed (the JSON keeps all)
TTFT_BAR_VS_SDPA = 2.0


def build_model(torch, config, seed):
    """Gemma4ForCausalLM of CONFIGS[config], built on the GPU in bf16 (no host copy of the weights)."""
    import hf_gemma4
    from transformers import Gemma4ForCausalLM
    shape = CONFIGS[config]
    model_config = hf_gemma4.build_config(layers=shape["layers"], hidden=shape["hidden"], vocab=shape["vocab"])
    model_config.intermediate_size = shape["intermediate"]
    model_config.max_position_embeddings = 40960
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = Gemma4ForCausalLM(model_config).eval()
    finally:
        torch.set_default_dtype(previous)
    hf_gemma4.check_shapes(model)
    return model


def synchronized(torch, function, issued=None):
    """(result, seconds) of function() between two device synchronisations; with a list `issued`,
    appends the seconds until function() returned (its host part: the GPU may still be working)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = function()
    if issued is not None:
        issued.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return result, time.perf_counter() - start


class HostParts:
    """Host time inside transformers' attention and mask functions (--host-parts): install()
    registers timing wrappers around the "wideattn" and "sdpa" attention and mask functions
    (wideattn.transformers' and transformers' own; remove() registers those again); `seconds`
    sums per part: "attention global", "attention sliding" (by the call's sliding_window) and
    "masks"; a call made while another timed call of the same kind runs is not counted again."""

    PARTS = ("attention global", "attention sliding", "masks")

    def __init__(self):
        self.seconds = dict.fromkeys(self.PARTS, 0.0)
        self.depth = {"attention": 0, "masks": 0}
        self.saved = []

    def _timed(self, kind, function):
        def wrapper(*args, **kwargs):
            if self.depth[kind]:
                return function(*args, **kwargs)
            self.depth[kind] += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.depth[kind] -= 1
                if kind == "masks":
                    part = "masks"
                else:
                    part = "attention sliding" if kwargs.get("sliding_window") is not None else "attention global"
                self.seconds[part] += elapsed
        return wrapper

    def install(self):
        import wideattn.transformers as hf
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        self.saved = [(AttentionInterface, "wideattn", hf.attention_forward, "attention"),
                      (AttentionInterface, "sdpa", sdpa_attention_forward, "attention"),
                      (AttentionMaskInterface, "wideattn", getattr(hf, "build_mask", sdpa_mask), "masks"),
                      (AttentionMaskInterface, "sdpa", sdpa_mask, "masks")]
        for interface, name, function, kind in self.saved:
            interface.register(name, self._timed(kind, function))

    def remove(self):
        for interface, name, function, _ in self.saved:
            interface.register(name, function)
        self.saved = []

    def reset(self):
        self.seconds = dict.fromkeys(self.PARTS, 0.0)


def new_cache(model):
    """An empty DynamicCache for the model (with its config where transformers takes one)."""
    from transformers import DynamicCache
    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


def fill_context(torch, model, tokens, attention_mask=None):
    """A DynamicCache holding `tokens` [1, n], filled in PREFILL_CHUNK chunks (with the 2-D
    attention_mask [1, n] of the tokens so far, when given); the next token."""
    cache = new_cache(model)
    logits = None
    for begin in range(0, tokens.shape[1], PREFILL_CHUNK):
        chunk = tokens[:, begin:begin + PREFILL_CHUNK]
        mask = None if attention_mask is None else attention_mask[:, :begin + chunk.shape[1]]
        logits = model(input_ids=chunk, attention_mask=mask, past_key_values=cache, use_cache=True).logits
    return cache, logits[:, -1].argmax(-1, keepdim=True)


def case_tokens(torch, kind, context, args, vocab):
    """A case's prompt tokens [1, context] (seeded by args.seed) and, for decode_padded, its 2-D
    attention mask with the first PADDED_TOKENS tokens masked out (else None)."""
    generator = torch.Generator(device="cpu").manual_seed(args.seed)
    tokens = torch.randint(0, vocab, (1, context), generator=generator).cuda()
    mask = None
    if kind == "decode_padded":
        mask = torch.ones((1, context), dtype=torch.long, device="cuda")
        mask[:, :PADDED_TOKENS] = 0
    return tokens, mask


def decode_step(torch, model, token, mask, cache, issued=None):
    """One synchronised greedy decode step of `token` over `cache`, the mask (when there is one)
    grown by one attended token first, as generate() grows it: (next token, mask, seconds);
    `issued` as synchronized() takes it."""
    if mask is not None:
        mask = torch.cat([mask, mask.new_ones((1, 1))], dim=-1)

    def decode():
        out = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
        return out.logits[:, -1].argmax(-1, keepdim=True)
    token, seconds = synchronized(torch, decode, issued)
    return token, mask, seconds


def run_case(torch, model, kind, context, args, vocab, host_parts=None):
    """(seconds of the case's timed repetitions (list), parts): with `host_parts` (the HostParts
    whose wrappers are installed) a decode case's parts are a dict of "host_ms" and "wait_ms"
    (medians over the timed steps) and the mean ms a timed step spends in each HostParts part;
    None otherwise."""
    tokens, mask = case_tokens(torch, kind, context, args, vocab)
    with torch.no_grad():
        if kind == "ttft":
            def first_token():
                cache = new_cache(model)
                out = model(input_ids=tokens, past_key_values=cache, use_cache=True, logits_to_keep=1)
                return out.logits[:, -1].argmax(-1)
            synchronized(torch, first_token)  # warm-up: modules, plans, allocator
            return [synchronized(torch, first_token)[1] for _ in range(args.reps)], None
        cache, token = fill_context(torch, model, tokens, mask)
        times, issued = [], []
        for step in range(args.warmup + args.steps):
            if host_parts is not None and step == args.warmup:
                host_parts.reset()
            token, mask, seconds = decode_step(torch, model, token, mask, cache,
                                               issued if step >= args.warmup else None)
            if step >= args.warmup:
                times.append(seconds)
        if host_parts is None:
            return times, None
        parts = {"host_ms": statistics.median(issued) * 1e3,
                 "wait_ms": statistics.median(t - h for t, h in zip(times, issued)) * 1e3}
        for name, total in host_parts.seconds.items():
            parts[name.replace(" ", "_") + "_ms"] = total / args.steps * 1e3
        return times, parts


def profile_case(torch, model, kind, context, args, vocab):
    """--kernel-times: [(kernel name, device microseconds, calls)] of args.steps decode steps
    (after args.warmup) over one context of `kind`, from torch.profiler's device activity."""
    from torch.profiler import ProfilerActivity, profile
    tokens, mask = case_tokens(torch, kind, context, args, vocab)
    with torch.no_grad():
        cache, token = fill_context(torch, model, tokens, mask)
        for _ in range(args.warmup):
            token, mask, _ = decode_step(torch, model, token, mask, cache)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                token, mask, _ = decode_step(torch, model, token, mask, cache)
    rows = []
    for event in prof.key_averages():
        micros = getattr(event, "self_device_time_total", None)
        if micros is None:   # torch < 2.4
            micros = event.self_cuda_time_total
        if micros > 0:
            rows.append((event.key, float(micros), int(event.count)))
    return rows


def kernel_summary(rows, steps):
    """profile_case's rows as per-step figures: {"step_device_ms", "kernels": [{"name",
    "ms_per_step", "calls_per_step"}] by time, most first}."""
    kernels = [{"name": name, "ms_per_step": micros / steps / 1e3, "calls_per_step": calls / steps}
               for name, micros, calls in rows]
    kernels.sort(key=lambda k: (-k["ms_per_step"], k["name"]))
    return {"step_device_ms": sum(k["ms_per_step"] for k in kernels), "kernels": kernels}


def kernel_differences(first, second):
    """[(name, first's ms a step, second's, first - second)] of every kernel of two
    kernel_summary()s (0 where one has none), largest difference first."""
    a = {k["name"]: k["ms_per_step"] for k in first["kernels"]}
    b = {k["name"]: k["ms_per_step"] for k in second["kernels"]}
    rows = [(name, a.get(name, 0.0), b.get(name, 0.0), a.get(name, 0.0) - b.get(name, 0.0)) for name in a.keys() | b.keys()]
    rows.sort(key=lambda r: (-abs(r[3]), r[0]))
    return rows


def measure_kernel_times(torch, model, args, report, hf, has_mask_rules, case):
    """--kernel-times for one decode case: profile_case per attention into
    report["cases"][case][attention]["kernel_times"], printed, then the differences of the first
    two attentions."""
    kind, context = CASES[case]
    report["cases"][case] = {}
    summaries = {}
    for attention in args.attention:
        before = hf.calls.get("dense", 0)
        with attention_set(model, hf, has_mask_rules, attention):
            rows = profile_case(torch, model, kind, context, args, CONFIGS[args.config]["vocab"])
        summary = kernel_summary(rows, args.steps)
        summaries[attention] = summary
        served = hf.calls.get("dense", 0) - before
        report["cases"][case][attention] = {"kernel_times": summary, "wideattn_calls": served}
        print(f"{case:16s} {attention:17s} device time {summary['step_device_ms']:.3f} ms a step ({args.steps} "
              f"profiled steps, {served} calls on wideattn in all)", flush=True)
        for k in summary["kernels"][:KERNEL_ROWS]:
            print(f"{'':16s}   {k['ms_per_step']:8.3f} ms {k['calls_per_step']:6.1f} calls  "
                  f"{k['name'][:KERNEL_NAME_CHARS]}")
        torch.cuda.empty_cache()
    if len(args.attention) < 2:
        return
    first, second = args.attention[0], args.attention[1]
    print(f"{case:16s} kernels by difference a step, {first} - {second} (ms):")
    for name, a, b, diff in kernel_differences(summaries[first], summaries[second])[:KERNEL_DIFF_ROWS]:
        print(f"{'':16s}   {diff:+8.3f} ({a:.3f} against {b:.3f})  {name[:KERNEL_NAME_CHARS]}")


def paired_summary(first, second):
    """The paired comparison of two attentions' step times of the same rounds (lists of seconds,
    first[i] and second[i] from round i): ratios second / first (> 1: `first` is faster), their
    median, its INTERVAL bootstrap interval over the rounds (BOOTSTRAP_RESAMPLES resamples, fixed
    seed) and the rounds `first` won."""
    ratios = [b / a for a, b in zip(first, second)]
    rng = random.Random(BOOTSTRAP_SEED)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1.0 - INTERVAL) / 2
    low = medians[int(tail * BOOTSTRAP_RESAMPLES)]
    high = medians[min(int((1.0 - tail) * BOOTSTRAP_RESAMPLES), BOOTSTRAP_RESAMPLES - 1)]
    return {"rounds": len(ratios), "median_ratio": statistics.median(ratios), "interval": [low, high],
            "first_won": sum(r > 1.0 for r in ratios)}


def paired_verdict(summary, bar):
    """'met' when the interval lies above bar, 'MISSED' when it lies below, else 'undecided'."""
    low, high = summary["interval"]
    return "met" if low > bar else "MISSED" if high < bar else "undecided"


@contextlib.contextmanager
def attention_set(model, hf, has_mask_rules, attention):
    """A with block run with the model's attention implementation and wideattn's mask rule set for
    `attention`; the mask rule it replaced is restored on leaving (packages without mask rules
    have none to set)."""
    implementation, mask_check = ATTENTIONS[attention]
    model.set_attn_implementation(implementation)
    previous = hf.set_mask_check(mask_check or "auto") if has_mask_rules else None
    try:
        yield
    finally:
        if has_mask_rules:
            hf.set_mask_check(previous)


def run_interleaved(torch, model, kind, context, args, vocab, hf, has_mask_rules):
    """--interleave: one context (filled with the first attention), then args.warmup steps of each
    attention and args.steps rounds of one step each (the order reversed every other round), each
    step synchronised. Returns {attention: [seconds of its timed steps, in round order]} and
    {attention: calls served by wideattn}."""
    attentions = args.attention
    tokens, mask = case_tokens(torch, kind, context, args, vocab)
    times = {attention: [] for attention in attentions}
    served = dict.fromkeys(attentions, 0)
    with torch.no_grad():
        with attention_set(model, hf, has_mask_rules, attentions[0]):
            cache, token = fill_context(torch, model, tokens, mask)
        schedule = [(attention, False) for _ in range(args.warmup) for attention in attentions]
        for round_index in range(args.steps):
            order = attentions if round_index % 2 == 0 else attentions[::-1]
            schedule += [(attention, True) for attention in order]
        for attention, timed in schedule:
            before = hf.calls.get("dense", 0)
            with attention_set(model, hf, has_mask_rules, attention):
                token, mask, seconds = decode_step(torch, model, token, mask, cache)
            if timed:
                times[attention].append(seconds)
                served[attention] += hf.calls.get("dense", 0) - before
    return times, served


def measure(args):
    import torch
    import wideattn
    import wideattn.transformers
    import hf_gemma4
    if not torch.cuda.is_available():
        print("gemma4_generation: no CUDA device")
        return 2
    hf_gemma4.register_attention()
    model = build_model(torch, args.config, args.seed)
    report = {"tool": "gemma4_generation", "label": args.label, "config": args.config, **CONFIGS[args.config],
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "transformers": __import__("transformers").__version__, "wideattn_package": wideattn.__file__,
              "wideattn_version": wideattn.version(), "steps": args.steps, "warmup": args.warmup, "reps": args.reps,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": {}}
    report["rounds"] = args.rounds
    # Plan reuse across decode steps (wideattn.transformers, on by default): the setting of this run and,
    # after the cases, the calls it served and the exact-count retries it made. Packages from before
    # plan reuse and mask rules (a94d5f9's, for --compare) have neither: the report says so (None).
    hf = wideattn.transformers
    has_reuse = hasattr(hf, "set_decode_reuse")
    has_mask_rules = hasattr(hf, "set_mask_check")
    if not has_mask_rules and "wideattn-per-step" in args.attention:
        raise SystemExit("gemma4_generation: --attention wideattn-per-step needs a wideattn package with "
                         f"set_mask_check ({wideattn.__file__} has none)")
    reuse_on = None
    if has_reuse:
        reuse_on = hf.set_decode_reuse(False)  # the setting, read by setting it and putting it back
        hf.set_decode_reuse(reuse_on)
    reuse_before = dict(hf.decode_reuse) if has_reuse else {}
    report["host_parts"] = args.host_parts
    report["interleave"] = args.interleave
    report["kernel_times"] = args.kernel_times
    host_parts = HostParts() if args.host_parts else None
    if host_parts is not None:
        host_parts.install()
    try:
        measure_cases(torch, model, args, report, hf, has_mask_rules, host_parts)
    finally:
        if host_parts is not None:
            host_parts.remove()
    if has_reuse:
        report["decode_reuse"] = {"on": reuse_on, **{key: value - reuse_before.get(key, 0)
                                                     for key, value in hf.decode_reuse.items()}}
        print(f"plan reuse across decode steps: {'on' if reuse_on else 'off'}; "
              + ", ".join(f"{key} {value}" for key, value in report["decode_reuse"].items() if key != "on"))
    else:
        report["decode_reuse"] = None
        print("plan reuse across decode steps: not in this wideattn package")
    ratios(report, report, "sdpa", "wideattn", BARS_VS_SDPA)
    ratios(report, report, "wideattn-per-step", "wideattn", {})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


def measure_interleaved(torch, model, args, report, hf, has_mask_rules, case):
    """--interleave for one decode case: args.rounds contexts of run_interleaved, pooled, into
    report["cases"][case]: per attention the step statistics, and "paired" against the first other
    attention (paired_summary of the rounds' steps, the first named attention first)."""
    kind, context = CASES[case]
    pooled = {attention: [] for attention in args.attention}
    served = dict.fromkeys(args.attention, 0)
    for round_index in range(args.rounds):
        times, calls = run_interleaved(torch, model, kind, context, args, CONFIGS[args.config]["vocab"], hf,
                                       has_mask_rules)
        for attention in args.attention:
            pooled[attention] += times[attention]
            served[attention] += calls[attention]
            print(f"{case:16s} {attention:17s} {statistics.median(times[attention]) * 1e3:10.3f} ms (context "
                  f"{round_index + 1}, median of {len(times[attention])} interleaved steps; {calls[attention]} "
                  f"calls on wideattn)", flush=True)
        torch.cuda.empty_cache()
    report["cases"][case] = {}
    for attention, times in pooled.items():
        report["cases"][case][attention] = {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
                                            "max_ms": max(times) * 1e3, "samples": len(times),
                                            "wideattn_calls": served[attention], "interleaved": True}
    first, other = args.attention[0], args.attention[1]
    summary = paired_summary(pooled[first], pooled[other])
    summary["first"], summary["second"] = first, other
    report["cases"][case]["paired"] = summary
    verdict = ""
    if case == "decode_8k" and {first, other} == {"wideattn", "sdpa"}:
        wideattn_first = first == "wideattn"
        oriented = summary if wideattn_first else {
            "interval": [1.0 / summary["interval"][1], 1.0 / summary["interval"][0]]}
        verdict = f"; bar wideattn faster than sdpa: {paired_verdict(oriented, DECODE_BAR_VS_SDPA)}"
    low, high = summary["interval"]
    print(f"{case:16s} paired: {other} / {first} step time, median {summary['median_ratio']:.3f}x over "
          f"{summary['rounds']} rounds ({INTERVAL:.0%} interval {low:.3f}-{high:.3f}x), {first} faster in "
          f"{summary['first_won']}{verdict}", flush=True)


def measure_cases(torch, model, args, report, hf, has_mask_rules, host_parts):
    """measure's loop: every case of args.cases for every attention of args.attention, args.rounds
    times alternated, into report["cases"] (with --host-parts, each decode round's host parts;
    with --interleave, a decode case's attentions alternate step by step: measure_interleaved)."""
    for case in args.cases:
        kind, context = CASES[case]
        if args.interleave and kind != "ttft":
            measure_interleaved(torch, model, args, report, hf, has_mask_rules, case)
            continue
        if args.kernel_times:
            if kind != "ttft":
                measure_kernel_times(torch, model, args, report, hf, has_mask_rules, case)
            continue
        samples = {attention: [] for attention in args.attention}
        rounds = {attention: [] for attention in args.attention}
        counts = {attention: {"wideattn_calls": 0, "mask_verifications": 0} for attention in args.attention}
        host_rounds = {attention: [] for attention in args.attention}
        for round_index in range(args.rounds):
            for attention in args.attention:
                before = dict(hf.calls)
                verified = hf.verifications["count"] if has_mask_rules else 0
                with attention_set(model, hf, has_mask_rules, attention):
                    times, parts = run_case(torch, model, kind, context, args, CONFIGS[args.config]["vocab"],
                                            host_parts)
                served = hf.calls["dense"] - before.get("dense", 0)
                verifications = hf.verifications["count"] - verified if has_mask_rules else 0
                counts[attention]["wideattn_calls"] += served
                counts[attention]["mask_verifications"] += verifications
                samples[attention] += times
                rounds[attention].append(statistics.median(times) * 1e3)
                print(f"{case:16s} {attention:17s} {rounds[attention][-1]:10.3f} ms (round {round_index + 1}, median "
                      f"of {len(times)}; {served} calls on wideattn, {verifications} mask verifications)", flush=True)
                if parts:
                    host_rounds[attention].append(parts)
                    print(f"{'':16s} {'':17s} host parts (ms a step): "
                          + ", ".join(f"{name[:-3].replace('_', ' ')} {value:.3f}" for name, value in parts.items()),
                          flush=True)
                torch.cuda.empty_cache()
        report["cases"][case] = {}
        for attention, times in samples.items():
            report["cases"][case][attention] = {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
                                                "max_ms": max(times) * 1e3, "samples": len(times),
                                                "round_medians_ms": rounds[attention], **counts[attention]}
            if host_rounds[attention]:
                report["cases"][case][attention]["host_parts_rounds"] = host_rounds[attention]


def ratios(new, old, old_attention, new_attention, bars):
    """Prints old/new median ratios per case (> 1: new is faster) with the bar of the case in
    `bars` ({case: (bar, strict)}: the ratio must exceed bar when strict, reach it otherwise)."""
    for case, results in new["cases"].items():
        a = old["cases"].get(case, {}).get(old_attention)
        b = results.get(new_attention)
        if new is old and "paired" in results:
            continue   # an interleaved case: measure_interleaved printed its paired ratio
        if not a or not b or "median_ms" not in a or "median_ms" not in b:
            continue   # no step times (--kernel-times)
        ratio = a["median_ms"] / b["median_ms"]
        verdict = ""
        if case in bars:
            bar, strict = bars[case]
            met = ratio > bar if strict else ratio >= bar
            verdict = f"  (bar {'>' if strict else '>='} {bar}x: {'met' if met else 'MISSED'})"
        print(f"{case:11s} {new.get('label') or ''} {new_attention} vs {old.get('label') or ''} {old_attention}: "
              f"{ratio:.3f}x{verdict}")


# The bars of one report (wideattn against sdpa) and of two (this build's wideattn against main's).
BARS_VS_SDPA = {"ttft_8k": (TTFT_BAR_VS_SDPA, False), "decode_8k": (DECODE_BAR_VS_SDPA, True)}
BARS_VS_MAIN = {"decode_8k": (DECODE_BAR_VS_MAIN, False)}


def self_test():
    """The paired statistics on synthetic step times: a 10% faster attention under a drift of the
    host that moves both, equal attentions, and a slower one; the --kernel-times tables of
    synthetic profiles."""
    failures = []

    def check(label, condition, detail):
        print(f"{'ok  ' if condition else 'FAIL'} {label}" + ("" if condition else f": {detail}"))
        if not condition:
            failures.append(label)

    noise = random.Random(7)
    drift = [0.020 * (1.0 + 0.4 * ((i // 10) % 3)) for i in range(60)]   # the host's speed moves 1.0-1.8x
    fast = [d * (1.0 + noise.uniform(-0.02, 0.02)) for d in drift]
    slow = [d * 1.1 * (1.0 + noise.uniform(-0.02, 0.02)) for d in drift]
    s = paired_summary(fast, slow)
    check("a 10% faster attention: median ratio near 1.1", abs(s["median_ratio"] - 1.1) < 0.02, s)
    check("its interval lies above 1, within 2% of 1.1", s["interval"][0] > 1.0 and
          abs(s["interval"][0] - 1.1) < 0.02 and abs(s["interval"][1] - 1.1) < 0.02, s)
    check("it won nearly every round", s["first_won"] >= 58 and s["rounds"] == 60, s)
    check("the bar verdict: met", paired_verdict(s, 1.0) == "met", s)
    check("the other way round: MISSED", paired_verdict(paired_summary(slow, fast), 1.0) == "MISSED", s)
    same = [d * (1.0 + noise.uniform(-0.05, 0.05)) for d in drift]
    twin = [t * (1.03 if i % 2 else 1.0 / 1.03) for i, t in enumerate(same)]   # ahead and behind by turns
    e = paired_summary(same, twin)
    check("equal attentions: undecided, interval around 1", paired_verdict(e, 1.0) == "undecided" and
          e["interval"][0] < 1.0 < e["interval"][1], e)
    check("the same inputs give the same interval", paired_summary(same, twin) == e, e)
    first = kernel_summary([("gemm", 3000.0, 60), ("attention", 900.0, 30), ("copy", 300.0, 30)], 3)
    second = kernel_summary([("gemm", 3000.0, 60), ("sdpa", 600.0, 30), ("copy", 450.0, 30), ("fill", 30.0, 3)], 3)
    check("kernel times: per step, most first", [k["name"] for k in first["kernels"]] == ["gemm", "attention", "copy"]
          and abs(first["kernels"][1]["ms_per_step"] - 0.3) < 1e-12 and first["kernels"][1]["calls_per_step"] == 10
          and abs(first["step_device_ms"] - 1.4) < 1e-12, first)
    diffs = kernel_differences(first, second)
    check("kernel differences: largest first, absent as 0", [(n, round(d, 6)) for n, _, _, d in diffs] ==
          [("attention", 0.3), ("sdpa", -0.2), ("copy", -0.05), ("fill", -0.01), ("gemm", 0.0)], diffs)
    print(f"gemma4_generation self-test: {len(failures)} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="12")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--attention", default="wideattn,sdpa", help=f"comma-separated of {', '.join(ATTENTIONS)}")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every attention per case, alternated")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default="")
    parser.add_argument("--json")
    parser.add_argument("--compare", nargs=2, metavar=("NEW", "OLD"))
    parser.add_argument("--host-parts", action="store_true",
                        help="decode cases: also the host time of a step inside the attention and mask functions")
    parser.add_argument("--interleave", action="store_true",
                        help="decode cases: alternate the attentions step by step in one context; paired ratios")
    parser.add_argument("--kernel-times", action="store_true",
                        help="decode cases: the GPU time of a step by kernel, per attention (torch.profiler)")
    parser.add_argument("--self-test", action="store_true", help="check the paired statistics and the kernel tables (no GPU) and exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if args.compare:
        with open(args.compare[0]) as f:
            new = json.load(f)
        with open(args.compare[1]) as f:
            old = json.load(f)
        ratios(new, old, "wideattn", "wideattn", BARS_VS_MAIN)
        ratios(new, old, "sdpa", "sdpa", {})
        return 0
    args.cases = [c for c in args.cases.split(",") if c]
    args.attention = [a for a in args.attention.split(",") if a]
    if not args.cases or any(c not in CASES for c in args.cases):
        parser.error(f"--cases: choose from {', '.join(CASES)}")
    if not args.attention or any(a not in ATTENTIONS for a in args.attention):
        parser.error(f"--attention: choose from {', '.join(ATTENTIONS)}")
    if args.steps < 1 or args.reps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--steps, --reps and --rounds must be >= 1, --warmup >= 0")
    if args.interleave and args.host_parts:
        parser.error("--interleave and --host-parts do not combine (the wrappers time whole rounds)")
    if args.kernel_times and (args.interleave or args.host_parts):
        parser.error("--kernel-times does not combine with --interleave or --host-parts")
    if args.interleave and len(args.attention) < 2:
        parser.error("--interleave needs two or more --attention names")
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
