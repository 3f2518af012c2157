#!/usr/bin/env python3
"""Accuracy of wideattn against the tuned Triton peer on the inputs Gemma 4 produces, and an
in-process A/B of two bundles' kernels.

Accuracy: for each case, input distribution and seed, builds fresh paged inputs (page 16,
shuffled block table), computes the full fp64 output with the bundle's reference_f64 kernel,
runs every BF16 kernel of the bundle (the dispatcher's choice and every other BF16 prefill
kernel by name) and the Triton paged prefill kernel in its tuned configuration (best by time for
the case, tuned once per case on the first distribution), and reports the mean / max absolute
error of each against fp64 and each kernel's ratio to Triton's on the same inputs. The bars:
mean abs <= MEAN_ABS_BAR x and max abs <= MAX_ABS_BAR x Triton's, on every distribution and seed.

The distributions (DISTRIBUTIONS) model Gemma 4's global layers at softmax scale 1.0: Q and K
RMS-normalised per head vector as QK-norm makes them (RMS 0.3 .. 1.0), K with outlier channels
(a per-channel gain of x20 .. x60, as a learned k_norm weight makes them), V RMS-normalised with a
large offset common to every key, and the N(0, 1) inputs of the timing suite for comparison.

A/B (--variant LABEL=DIR, repeatable): the kernels of each variant bundle are measured for
accuracy on the same inputs (named KERNEL@LABEL), and --ab-kernels of every bundle are timed in
one process, interleaved in a balanced order (peer_bench.time_interleaved) on the N(0, 1) inputs
of timing-suite cases, in --ab-rounds rounds; the report gives each kernel's median ms per bundle
and its speed change against the main bundle's.

  tools/bench/peer_accuracy.py --lib build/dispatch/libwideattn.so --bundle build/bundle [--seeds 3]
                   [--cases prompt_4k,chunk_1k_ctx_15k] [--dists LIST] [--variant LABEL=DIR ...]
                   [--ab-cases LIST] [--ab-rounds N] [--json FILE]
  peer_accuracy.py --self-test     (plain Python: distribution table, ratio and bar logic)
"""

import argparse
import contextlib
import dataclasses
import datetime
import io
import json
import os
import statistics
import sys
import time

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
if TOOLS_DIR not in sys.path:
    sys.path.insert(0, TOOLS_DIR)

import peer_bench as pb  # noqa: E402  (imports without torch)

MEAN_ABS_BAR = 1.02
MAX_ABS_BAR = 1.15
DEFAULT_SEEDS = 3
SEED_STRIDE = 1000003                # seeds of one run: base + i * stride
AB_REPS = 20
AB_WARMUP = 3
AB_ROUNDS = 3

ACCURACY_CASES = {
    "prompt_4k": pb.Case("prompt_4k", (4 * pb.K1,), (0,)),
    "chunk_1k_ctx_15k": pb.Case("chunk_1k_ctx_15k", (pb.K1,), (15 * pb.K1,)),
    "mixed_3": pb.Case("mixed_3", (777, 1, 300), (3000, 9000, 0)),
    "tp4_prompt_2k": pb.Case("tp4_prompt_2k", (2 * pb.K1,), (0,), num_q_heads=pb.TP4_Q_HEADS,
                             num_kv_heads=pb.TP4_KV_HEADS),
}
AB_CASES = ("prompt-16k", "chunk-8k@16k", "prompt-4k")


@dataclasses.dataclass(frozen=True)
class Distribution:
    """Q/K/V of one Gemma-like input family. rms = None keeps N(0, std) entries unnormalised."""

    name: str
    q_rms: float = None
    k_rms: float = None
    k_outliers: int = 0           # K channels with a gain of k_outlier_gain
    k_outlier_gain: float = 1.0
    v_offset_rms: float = 0.0     # RMS of a vector added to every key's V (per KV head)
    q_std: float = pb.DEFAULT_Q_STD

    def describe(self):
        if self.q_rms is None:
            return f"N(0,1) K/V, N(0,{self.q_std:.3g}) Q"
        text = f"QK-norm Q rms {self.q_rms}, K rms {self.k_rms}"
        if self.k_outliers:
            text += f", {self.k_outliers} K channel(s) x{self.k_outlier_gain:g}"
        if self.v_offset_rms:
            text += f", V offset rms {self.v_offset_rms:g}"
        return text


DISTRIBUTIONS = {d.name: d for d in (
    Distribution("normal"),
    Distribution("qknorm_q0.5", q_rms=0.5, k_rms=1.0),
    Distribution("qknorm_q0.3", q_rms=0.3, k_rms=1.0),
    Distribution("qknorm_q1.0", q_rms=1.0, k_rms=1.0),
    Distribution("outlier_x20", q_rms=0.5, k_rms=1.0, k_outliers=1, k_outlier_gain=20.0),
    Distribution("outlier_x60", q_rms=0.5, k_rms=1.0, k_outliers=2, k_outlier_gain=60.0),
    Distribution("v_offset", q_rms=0.5, k_rms=1.0, v_offset_rms=8.0),
    Distribution("gemma_mix", q_rms=0.7, k_rms=1.0, k_outliers=1, k_outlier_gain=40.0, v_offset_rms=4.0),
)}
GEMMA_DISTS = tuple(name for name in DISTRIBUTIONS if name != "normal")


def ratio(value, peer):
    """value / peer, or inf when the peer is exact and value is not."""
    if peer > 0:
        return value / peer
    return 1.0 if value == 0 else float("inf")


def verdicts(entries):
    """Per kernel: worst mean-abs and max-abs ratios over entries and whether both bars hold."""
    out = {}
    for e in entries:
        for kernel, r in e["ratios"].items():
            w = out.setdefault(kernel, {"worst_mean_ratio": 0.0, "worst_max_ratio": 0.0, "runs": 0})
            w["worst_mean_ratio"] = max(w["worst_mean_ratio"], r["mean_abs"])
            w["worst_max_ratio"] = max(w["worst_max_ratio"], r["max_abs"])
            w["runs"] += 1
    for w in out.values():
        w["meets_bars"] = w["worst_mean_ratio"] <= MEAN_ABS_BAR and w["worst_max_ratio"] <= MAX_ABS_BAR
    return out


# ----------------------------------------------------------------------------- GPU part


def normalised(torch, shape, rms, generator, gain=None):
    """Rows of N(0, 1) scaled to RMS `rms` over the last dim, then times a per-channel gain."""
    x = torch.randn(*shape, generator=generator, dtype=torch.float32, device="cuda")
    x = x * (rms / x.square().mean(dim=-1, keepdim=True).sqrt())
    return x if gain is None else x * gain


def fill_inputs(data, dist, generator):
    """Replaces every input copy of the case with the distribution's."""
    for copy in range(data.copies):
        fill_copy(data, dist, generator, copy)


def fill_copy(data, dist, generator, copy):
    torch = pb._lazy_torch()
    case = data.case
    d, hkv = case.head_dim, case.num_kv_heads
    bf16 = torch.bfloat16
    q_shape = (case.total_q, case.num_q_heads, d)
    kv_shape = (data.num_blocks, pb.PAGE_SIZE, hkv, d)
    if dist.q_rms is None:
        data.q[copy] = (torch.randn(*q_shape, generator=generator, device="cuda") * dist.q_std).to(bf16)
        data.k_cache[copy] = torch.randn(*kv_shape, generator=generator, device="cuda").to(bf16)
        data.v_cache[copy] = torch.randn(*kv_shape, generator=generator, device="cuda").to(bf16)
        return
    gain = None
    if dist.k_outliers:
        gain = torch.ones(hkv, d, device="cuda")
        channels = torch.randperm(d, generator=generator, device="cuda")[:dist.k_outliers]
        gain[:, channels] = dist.k_outlier_gain
    data.q[copy] = normalised(torch, q_shape, dist.q_rms, generator).to(bf16)
    data.k_cache[copy] = normalised(torch, kv_shape, dist.k_rms, generator, gain).to(bf16)
    v = normalised(torch, kv_shape, 1.0, generator)
    if dist.v_offset_rms:
        v = v + normalised(torch, (hkv, d), dist.v_offset_rms, generator)
    data.v_cache[copy] = v.to(bf16)


class Bundle:
    """One bundle: a context with automatic selection and one pinned to each BF16 kernel."""

    def __init__(self, lib_path, bundle, capability):
        self.wa = pb.Wideattn(lib_path, bundle)
        if self.wa.status != pb.STATUS_OK:
            raise SystemExit(f"peer_accuracy: libwideattn unavailable: {self.wa.detail}")
        bf16 = pb.wideattn_ctypes.DTYPE_BF16
        names = sorted({k["name"] for k in self.wa.kernels
                        if k["kind"] == "prefill" and k["q_dtype"] == bf16 and k["kv_dtype"] == bf16
                        and k["o_dtype"] == bf16})
        self.pinned = {name: pb.Wideattn(lib_path, bundle, name) for name in names}
        self.capability = capability

    def outputs(self, data):
        """{kernel: output} of every BF16 kernel that runs on this device, outputs poisoned first."""
        torch = pb._lazy_torch()
        result = {}
        for name, wa in self.pinned.items():
            o = torch.full_like(data.q[0], float("nan"))
            params = wa.params(data, 0, o, None, pb.wideattn_ctypes.DTYPE_BF16)
            if wa.kernel_for(params, self.capability)[0] != name:
                continue
            wa.launch(params)
            torch.cuda.synchronize()
            result[name] = o
        return result


def accuracy_run(case, dist, seed, bundle, others, capability, triton_configs, log):
    torch = pb._lazy_torch()
    generators = (torch.Generator().manual_seed(seed), torch.Generator(device="cuda").manual_seed(seed))
    data = pb.CaseData(case, 1, pb.DEFAULT_Q_STD, generators)
    fill_inputs(data, DISTRIBUTIONS[dist], generators[1])
    ref, why = pb.reference_f64(bundle.wa, data, capability, lambda m: None)
    if ref is None:
        raise SystemExit(f"peer_accuracy: fp64 reference unavailable: {why}")
    entry = {"case": case.name, "dist": dist, "seed": seed, "errors": {}, "ratios": {}}
    peer = pb.TritonPeer(data)
    if case.name not in triton_configs:
        best, _ = pb.tune_triton(peer, lambda out: pb.error_stats(out, ref), log)
        triton_configs[case.name] = best["_config"]
    config = triton_configs[case.name]
    _, output = pb.make_triton(peer, config)
    entry["triton_config"] = config.label()
    entry["errors"]["triton-tuned"] = pb.error_stats(output(), ref)
    for name, out in bundle.outputs(data).items():
        entry["errors"][name] = pb.error_stats(out, ref)
    for label, other in others.items():  # the variant bundles' kernels on the same inputs
        for name, out in other.outputs(data).items():
            entry["errors"][f"{name}@{label}"] = pb.error_stats(out, ref)
    tri = entry["errors"]["triton-tuned"]
    for name, err in entry["errors"].items():
        if name != "triton-tuned":
            entry["ratios"][name] = {"mean_abs": ratio(err["mean_abs"], tri["mean_abs"]),
                                     "max_abs": ratio(err["max_abs"], tri["max_abs"])}
    log(f"{case.name:<18} {dist:<13} seed {seed:<8} triton {tri['mean_abs']:.3e}/{tri['max_abs']:.3e}  "
        + "  ".join(f"{n} x{r['mean_abs']:.3f}/x{r['max_abs']:.3f}" for n, r in entry["ratios"].items()))
    del data, ref, peer
    torch.cuda.empty_cache()
    return entry


def ab_timing(bundle, others, case_names, dists, kernels, rounds, log):
    """Each BF16 kernel of every bundle, interleaved in one process, per timing-suite case and
    input distribution."""
    torch = pb._lazy_torch()
    suite = {c.name: c for c in pb.build_suite()}
    results = []
    for name, dist in [(c, d) for c in case_names for d in dists]:
        case = suite[name]
        generators = (torch.Generator().manual_seed(1), torch.Generator(device="cuda").manual_seed(1))
        q_bytes = case.total_q * case.num_q_heads * case.head_dim * 2
        kv_bytes = 2 * sum(pb.blocks_needed(n) for n in case.seq_lens_k) * pb.PAGE_SIZE \
            * case.num_kv_heads * case.head_dim * 2
        copies = pb.input_copies(2 * q_bytes + kv_bytes, torch.cuda.get_device_properties(0).L2_cache_size)
        data = pb.CaseData(case, copies, pb.DEFAULT_Q_STD, generators)
        if dist != "normal":
            fill_inputs(data, DISTRIBUTIONS[dist], generators[1])
        impls = []
        for kernel in kernels:
            for label, b in [("main", bundle)] + list(others.items()):
                if kernel in b.pinned:
                    impl = pb.wideattn_impl(f"{kernel}@{label}", b.pinned[kernel], data, copies, b.capability,
                                            {"impls": {}}, log)
                    if impl is not None:
                        impls.append(impl)
        per_round = []
        for r in range(rounds):
            times, failed = pb.time_interleaved(impls, AB_REPS, AB_WARMUP, copies, None)
            if failed:
                raise SystemExit(f"peer_accuracy: A/B timing failed: {failed}")
            med = {k: statistics.median(v) for k, v in times.items()}
            per_round.append(med)
            log(f"A/B {name} {dist} round {r + 1}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in med.items()))
        entry = {"case": name, "dist": dist, "flops": case.flops, "rounds": per_round, "kernels": {}}
        for key in per_round[0]:
            ms = statistics.median(m[key] for m in per_round)
            kernel, label = key.split("@")
            main_ms = statistics.median(m[f"{kernel}@main"] for m in per_round)
            entry["kernels"][key] = {"ms": ms, "tflops": pb.tflops(case.flops, ms),
                                     "speed_vs_main_pct": 100 * (main_ms / ms - 1)}
            log(f"A/B {name} {dist} {key}: {ms:.3f} ms, {pb.tflops(case.flops, ms):.1f} TFLOP/s, "
                f"{100 * (main_ms / ms - 1):+.2f}% speed vs main (median of {rounds} rounds)")
        results.append(entry)
        del data, impls
        torch.cuda.empty_cache()
    return results


def run_gpu(args, log):
    torch = pb._lazy_torch()
    import triton
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    capability = torch.cuda.get_device_capability(0)
    bundle = Bundle(args.lib, args.bundle, capability)
    report = {"environment": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_properties(0).name, "capability": list(capability),
        "torch": torch.__version__, "triton": triton.__version__, "commit": args.commit,
        "bundle": args.bundle, "variants": dict(args.variants)},
        "bars": {"mean_abs": MEAN_ABS_BAR, "max_abs": MAX_ABS_BAR},
        "distributions": {n: DISTRIBUTIONS[n].describe() for n in args.dists}}
    others = {label: Bundle(args.lib, path, capability) for label, path in args.variants}
    if others and args.ab_rounds:
        report["ab"] = ab_timing(bundle, others, args.ab_cases, args.ab_dists, args.ab_kernels, args.ab_rounds, log)
    entries, triton_configs = [], {}
    start = time.time()
    for case_name in args.cases:
        for dist in args.dists:
            for i in range(args.seeds):
                entries.append(accuracy_run(ACCURACY_CASES[case_name], dist, args.seed + i * SEED_STRIDE,
                                            bundle, others, capability, triton_configs, log))
                if args.json:
                    pb.write_json(args.json, dict(report, runs=entries))
    gemma = [e for e in entries if e["dist"] != "normal"]
    report["runs"] = entries
    report["verdicts_gemma"] = verdicts(gemma)
    report["verdicts_normal"] = verdicts([e for e in entries if e["dist"] == "normal"])
    log(f"accuracy: {len(entries)} runs in {time.time() - start:.0f} s")
    for kernel, v in report["verdicts_gemma"].items():
        log(f"  {kernel}: worst ratio to tuned Triton on Gemma-like inputs: mean abs x{v['worst_mean_ratio']:.3f} "
            f"(bar {MEAN_ABS_BAR}), max abs x{v['worst_max_ratio']:.3f} (bar {MAX_ABS_BAR}): "
            + ("meets both" if v["meets_bars"] else "FAILS"))
    return report


# ----------------------------------------------------------------------------- CLI


def usage_error(argv, needle):
    """Whether parse_args(argv) exits with status 2 and a message containing `needle`."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse_args(argv)
    except SystemExit as exc:
        return exc.code == 2 and needle in err.getvalue()
    return False


def self_test():
    failures, count = [], [0]

    def check(cond, what):
        count[0] += 1
        if not cond:
            failures.append(what)

    check(ratio(2.0, 1.0) == 2.0 and ratio(0.0, 0.0) == 1.0 and ratio(1.0, 0.0) == float("inf"), "ratio")
    entries = [{"ratios": {"k": {"mean_abs": 1.01, "max_abs": 1.10}}},
               {"ratios": {"k": {"mean_abs": 0.99, "max_abs": 1.20}}}]
    v = verdicts(entries)["k"]
    check(v["worst_mean_ratio"] == 1.01 and v["worst_max_ratio"] == 1.20 and not v["meets_bars"]
          and v["runs"] == 2, "verdicts take the worst run and fail above a bar")
    check(verdicts(entries[:1])["k"]["meets_bars"], "verdicts accept within both bars")
    check(all(DISTRIBUTIONS[n].q_rms is not None for n in GEMMA_DISTS), "every Gemma-like family is QK-normed")
    check({d.q_rms for d in DISTRIBUTIONS.values() if d.q_rms} >= {0.3, 1.0}, "Q RMS spans 0.3 .. 1.0")
    gains = [d.k_outlier_gain for d in DISTRIBUTIONS.values() if d.k_outliers]
    check(min(gains) == 20.0 and max(gains) == 60.0, "K outlier gains span x20 .. x60")
    check(any(d.v_offset_rms > 0 for d in DISTRIBUTIONS.values()), "a V-offset family exists")
    check(all(c.seq_lens_k[0] > 0 for c in ACCURACY_CASES.values()), "cases have keys")
    check(max(c.seq_lens_k[0] for c in ACCURACY_CASES.values()) >= 16 * pb.K1, "a long context")
    check(set(AB_CASES) <= {c.name for c in pb.build_suite()}, "A/B cases are timing-suite cases")
    for argv, needle in ((["--dists", "bogus"], "--dists: unknown distribution 'bogus'"),
                         (["--cases", "prompt_9k"], "--cases: unknown case 'prompt_9k'"),
                         (["--seeds", "0"], "--seeds=0: must be >= 1"),
                         (["--ab-rounds", "-1"], "--ab-rounds=-1: must be >= 0"),
                         (["--variant", "main=/x"], "--variant 'main=/x': expected LABEL=DIR"),
                         (["--ab-dists", "x"], "--ab-dists: unknown distribution 'x'")):
        check(usage_error(argv, needle), f"usage error naming {argv}")
    for f in failures:
        print(f"peer_accuracy self-test: FAILED {f}")
    print(f"peer_accuracy self-test: {count[0] - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default="build/dispatch/libwideattn.so", help="libwideattn.so")
    ap.add_argument("--bundle", default="build/bundle", help="bundle whose kernels are measured")
    ap.add_argument("--cases", default="prompt_4k,chunk_1k_ctx_15k",
                    help=f"accuracy cases, any of {','.join(ACCURACY_CASES)}")
    ap.add_argument("--dists", default=",".join(DISTRIBUTIONS),
                    help=f"input distributions, any of {','.join(DISTRIBUTIONS)}")
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="fresh inputs per (case, distribution)")
    ap.add_argument("--seed", type=int, default=20261201, help="first seed")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=DIR",
                    help="a variant bundle, measured beside the main one (repeatable)")
    ap.add_argument("--ab-cases", default=",".join(AB_CASES), help="timing-suite cases of the A/B")
    ap.add_argument("--ab-rounds", type=int, default=AB_ROUNDS, help="interleaved A/B rounds (0: accuracy only)")
    ap.add_argument("--ab-dists", default="normal", help="input distributions of the A/B timing")
    ap.add_argument("--ab-kernels", default="wgmma_bf16c2p_d512,wgmma_bf16_d512,mma_bf16_d512", help="BF16 kernels the A/B times")
    ap.add_argument("--commit", default=os.environ.get("WIDEATTN_COMMIT", ""), help="commit measured")
    ap.add_argument("--json", help="write the JSON report here")
    ap.add_argument("--self-test", action="store_true", help="plain-Python checks, no GPU")
    args = ap.parse_args(argv)
    if args.self_test:
        return args
    args.cases = [c for c in args.cases.split(",") if c]
    args.dists = [d for d in args.dists.split(",") if d]
    args.ab_cases = [c for c in args.ab_cases.split(",") if c]
    for name in args.cases:
        if name not in ACCURACY_CASES:
            ap.error(f"--cases: unknown case '{name}' (known: {', '.join(ACCURACY_CASES)})")
    for name in args.dists:
        if name not in DISTRIBUTIONS:
            ap.error(f"--dists: unknown distribution '{name}' (known: {', '.join(DISTRIBUTIONS)})")
    if args.seeds < 1:
        ap.error(f"--seeds={args.seeds}: must be >= 1")
    if args.ab_rounds < 0:
        ap.error(f"--ab-rounds={args.ab_rounds}: must be >= 0")
    args.ab_kernels = [k for k in args.ab_kernels.split(",") if k]
    args.ab_dists = [d for d in args.ab_dists.split(",") if d]
    for name in args.ab_dists:
        if name not in DISTRIBUTIONS:
            ap.error(f"--ab-dists: unknown distribution '{name}' (known: {', '.join(DISTRIBUTIONS)})")
    args.variants = []
    for spec in args.variant:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path or label == "main" or "@" in label:
            ap.error(f"--variant '{spec}': expected LABEL=DIR with a label other than 'main', without '@'")
        args.variants.append((label, path))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return self_test()

    def log(message):
        print(message, flush=True)

    report = run_gpu(args, log)
    if args.json:
        pb.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
