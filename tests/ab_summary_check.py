#!/usr/bin/env python3
"""Checks tools/bench/ab_summary.py on two bench JSON files made here (two bundles x two rounds): every
round's figure per label, the median change against the first label, --kernel filtering, rows
paired by case (--by-case), and
the usage errors (exit 2, naming the argument or file); and the usage errors of
tools/gpu/ab_bench.sh, which checks its arguments before it needs a GPU, and its --cli runs with
stand-in CLIs (no GPU).
usage: ab_summary_check.py AB_SUMMARY_PY AB_BENCH_SH
"""
import json
import os
import subprocess
import sys
import tempfile


def bench_json(path, figures):
    cases = [{"case": case, "kernel": kernel, "tflops": tflops} for (case, kernel), tflops in figures]
    with open(path, "w") as f:
        json.dump({"tool": "wideattn bench", "cases": cases}, f)


def run(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def main():
    script = sys.argv[1]
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        def path(name):
            return os.path.join(tmp, name)

        a16, a4 = ("prompt_16k", "wgmma_bf16_d512"), ("prompt_4k", "wgmma_bf16_d512")
        m16 = ("prompt_16k", "mma_bf16_d512")
        bench_json(path("a1.json"), [(a16, 100.0), (m16, 50.0), (a4, 80.0)])
        bench_json(path("a2.json"), [(a16, 102.0), (m16, 50.0), (a4, 82.0)])
        bench_json(path("b1.json"), [(a16, 110.0), (m16, 49.0), (a4, 80.0)])
        bench_json(path("b2.json"), [(a16, 112.0), (m16, 51.0)])
        a = "base=" + path("a1.json") + "," + path("a2.json")
        b = "new=" + path("b1.json") + "," + path("b2.json")

        r = run(script, a, b)
        expect(r.returncode == 0, f"two labels: exit {r.returncode}, {r.stderr}")
        lines = r.stdout.splitlines()
        expect(lines[0] == "| case | kernel | base | new | new vs base |", f"header: {lines[0] if lines else ''}")
        # medians 101 -> 111: +9.9%; 50 -> 50: +0.0%; 81 -> 80 (one round only): -1.2%
        expect("| prompt_16k | wgmma_bf16_d512 | 100.0 / 102.0 | 110.0 / 112.0 | +9.9% |" in lines, "16k row")
        expect("| prompt_16k | mma_bf16_d512 | 50.0 / 50.0 | 49.0 / 51.0 | +0.0% |" in lines, "mma row")
        expect("| prompt_4k | wgmma_bf16_d512 | 80.0 / 82.0 | 80.0 | -1.2% |" in lines, "4k row, one round")
        expect(len(lines) == 5, f"rows: {len(lines)}")

        r = run(script, a, b, "--kernel", "mma_bf16_d512")
        expect(r.returncode == 0 and len(r.stdout.splitlines()) == 3 and "mma_bf16_d512" in r.stdout,
               f"--kernel filter: {r.stdout}")

        # --by-case: each bundle timed its own kernel (a variant bundle's candidate), paired by case.
        d1 = ("decode_1_ctx_32k", "decode_bf16w4_d512")
        p1 = ("decode_1_ctx_32k", "decode_bf16_d512")
        bench_json(path("c1.json"), [(d1, 20.0)])
        bench_json(path("c2.json"), [(d1, 22.0)])
        bench_json(path("p1.json"), [(p1, 23.0)])
        bench_json(path("p2.json"), [(p1, 23.0)])
        c = "base=" + path("c1.json") + "," + path("c2.json")
        p = "w8=" + path("p1.json") + "," + path("p2.json")
        r = run(script, c, p, "--by-case")
        expect(r.returncode == 0, f"--by-case: exit {r.returncode}, {r.stderr}")
        expect("| decode_1_ctx_32k | decode_bf16w4_d512 / decode_bf16_d512 | 20.0 / 22.0 | 23.0 / 23.0 | +9.5% |"
               in r.stdout.splitlines(), f"--by-case row: {r.stdout}")
        r = run(script, c, p)
        expect(r.returncode == 0 and "| decode_1_ctx_32k | decode_bf16w4_d512 | 20.0 / 22.0 | - | - |" in r.stdout,
               f"without --by-case the kernels do not pair: {r.stdout}")
        bench_json(path("twice.json"), [(d1, 20.0), (("decode_1_ctx_32k", "decode_bf16_d512"), 19.0)])

        not_bench = path("other.json")
        with open(not_bench, "w") as f:
            json.dump({"kernels": []}, f)
        bad_cases = [
            ((a, "new"), "argument 'new' is not LABEL=FILE"),
            ((a, "base=" + path("b1.json")), "label 'base' given twice"),
            ((a, "new=" + path("missing.json")), "cannot read bench JSON"),
            ((a, "new=" + not_bench), "has no 'cases' list"),
            ((a, b, "--kernel"), "option --kernel needs a value"),
            ((a, b, "--kernel", "no_such"), "--kernel no_such: no such kernel"),
            ((), "no LABEL=FILE arguments"),
            ((a, b, "--by-case", "--kernel", "mma_bf16_d512"), "--kernel and --by-case exclude each other"),
            (("base=" + path("twice.json"), p, "--by-case"), "case decode_1_ctx_32k twice"),
        ]
        for args, message in bad_cases:
            r = run(script, *args)
            expect(r.returncode == 2 and message in r.stderr, f"{args}: exit {r.returncode}, {r.stderr.strip()}")

        bench_script = sys.argv[2]
        bundle = os.path.join(tmp, "bundle")
        os.mkdir(bundle)
        open(os.path.join(bundle, "manifest.json"), "w").close()
        script_cases = [
            (("--rounds", "0", f"a={bundle}", f"b={bundle}"), "--rounds='0' is not an integer >= 1"),
            (("--cases",), "option --cases needs a value"),
            ((f"a={bundle}",), "give at least two LABEL=BUNDLE_DIR"),
            ((f"a={bundle}", f"b={tmp}"), f"b={tmp} has no manifest.json"),
            (("bundle",), "argument 'bundle' is not LABEL=BUNDLE_DIR"),
            (("--timing", "fast", f"a={bundle}", f"b={bundle}"), "--timing='fast' is not call or queued"),
            (("--kfv-cos-sin", "lut", f"a={bundle}", f"b={bundle}"), "--kfv-cos-sin='lut' is not formula or table"),
            (("--e4m3-scale", "-1", f"a={bundle}", f"b={bundle}"), "--e4m3-scale='-1' is not a positive decimal number"),
            (("--e4m3-scale", "1/256", f"a={bundle}", f"b={bundle}"), "--e4m3-scale='1/256' is not a positive decimal number"),
            (("--cli", "a", f"a={bundle}", f"b={bundle}"), "--cli 'a' is not LABEL=PATH"),
            (("--cli", "c=/bin/true", f"a={bundle}", f"b={bundle}"), "no LABEL=BUNDLE_DIR has the label 'c'"),
            (("--cli", f"a={tmp}/no_cli", f"a={bundle}", f"b={bundle}"), f"--cli a={tmp}/no_cli is not an executable file"),
        ]
        for args, message in script_cases:
            r = subprocess.run(["bash", bench_script, *args], capture_output=True, text=True)
            expect(r.returncode == 2 and message in r.stderr, f"ab_bench {args}: exit {r.returncode}, {r.stderr.strip()}")

        # --cli: each label's bench runs through its own CLI (stand-ins that copy a bench JSON), the
        # labels alternated every round, and the summary pairs their figures.
        log = path("cli.log")
        for label, source in (("a", "a1.json"), ("b", "b1.json")):
            fake = path(f"cli_{label}")
            with open(fake, "w") as f:
                f.write("#!/usr/bin/env bash\n"
                        "while (($#)); do [[ $1 == --json ]] && out=$2; shift; done\n"
                        f"echo \"{label} $WIDEATTN_BUNDLE\" >> {log}\n"
                        f"cp {path(source)} \"$out\"\n")
            os.chmod(fake, 0o755)
        out_dir = path("ab_out")
        r = subprocess.run(["bash", bench_script, "--rounds", "2", "--out", out_dir, "--cli", f"a={path('cli_a')}",
                            "--cli", f"b={path('cli_b')}", f"a={bundle}", f"b={bundle}"], capture_output=True, text=True)
        expect(r.returncode == 0, f"ab_bench --cli: exit {r.returncode}, {r.stderr.strip()}")
        calls = []
        if os.path.isfile(log):
            with open(log) as f:
                calls = f.read().split("\n")[:-1]
        expect(calls == [f"a {bundle}", f"b {bundle}"] * 2, f"ab_bench --cli calls: {calls}")
        expect("| prompt_16k | wgmma_bf16_d512 | 100.0 / 100.0 | 110.0 / 110.0 | +10.0% |" in r.stdout.splitlines(),
               f"ab_bench --cli summary: {r.stdout}")
        expect(os.path.isfile(os.path.join(out_dir, "summary.md")), "ab_bench --cli: no summary.md")

    for f in failures:
        print("FAIL", f)
    print(f"ab_summary: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
