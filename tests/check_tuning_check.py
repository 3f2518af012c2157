#!/usr/bin/env python3
"""Checks tools/bench/check_tuning.py (the tuning bar) on files made here: a pass, a choice slower
than the tolerance (and one exactly at it), a selected kernel other than the file's, a chosen kernel
or another candidate missing from the side-by-side run, the shape classes at their boundaries, "no
choice" with and without --require-choice, malformed input (exit 2 naming the file and field), the
real tuning file of 2026-12-01 against a side-by-side run made from its own timings, and
tools/gpu/gpu_suite.sh --only-tune end to end with a stand-in for the CLI that hands every command
line to the real CLI first (which must refuse it for want of a driver, not for its arguments).
usage: check_tuning_check.py CHECK_TUNING_PY REAL_TUNING_JSON GPU_SUITE_SH WIDEATTN_CLI BUNDLE_DIR
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

CHECKSUM = "0123456789abcdef"
PASS_EXIT, FAIL_EXIT, BAD_EXIT = 0, 1, 2


def tuning_doc(choices, device="NVIDIA H200"):
    """A tuning file: choices are (class, q_dtype, kv_dtype, kernel, [kernels timed])."""
    return {"format": 1, "tool": "wideattn tune", "device": {"name": device, "cc_major": 9, "cc_minor": 0,
                                                             "driver_version": 13000},
            "bundle_checksum": CHECKSUM,
            "choices": [{"class": c, "q_dtype": q, "kv_dtype": kv, "kernel": k,
                         "timings": [{"kernel": t, "total_ms": 1.0, "cases": [{"case": "x", "median_ms": 1.0}]}
                                     for t in timed]}
                        for c, q, kv, k, timed in choices]}


def bench_doc(records, gpu="NVIDIA H200"):
    """A bench report: records are (case, kernel, q_lens, q_dtype, kv_dtype, median_ms)."""
    return {"tool": "wideattn bench", "gpu": gpu, "suite": "prefill",
            "cases": [{"case": c, "kernel": k, "q_lens": q_lens, "contexts": [0] * len(q_lens), "q_dtype": q,
                       "kv_dtype": kv, "median_ms": ms} for c, k, q_lens, q, kv, ms in records]}


class Raw(str):
    """File content given as text (a plain str argument is a path)."""


class Checker:
    def __init__(self, script, tmp):
        self.script, self.tmp, self.failures = script, tmp, []

    def expect(self, condition, what):
        if not condition:
            self.failures.append(what)

    def write(self, name, doc):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def run(self, *args):
        return subprocess.run([sys.executable, self.script, *args], capture_output=True, text=True)

    def check(self, tuning, selected, side, *extra):
        """(exit status, rows of --json, stdout, stderr) of one run on documents or paths."""
        paths = [x if isinstance(x, str) and not isinstance(x, Raw) else self.write(f"in{i}.json", x)
                 for i, x in enumerate([tuning, selected, side])]
        out = os.path.join(self.tmp, "out.json")
        if os.path.exists(out):
            os.remove(out)
        r = self.run("--tuning", paths[0], "--selected", paths[1], "--side-by-side", paths[2], "--json", out, *extra)
        rows = json.load(open(out))["rows"] if os.path.exists(out) else []
        return r.returncode, rows, r.stdout, r.stderr


BF = ("bf16", "bf16")
FAST, SLOW = "wgmma_bf16_d512", "mma_bf16_d512"


def check_verdicts(t):
    tuning = tuning_doc([("prefill_short", *BF, FAST, [FAST, SLOW])])
    selected = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.4)])
    rc, rows, out, _ = t.check(tuning, selected, bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0),
                                                            ("prompt_4k", SLOW, [4096], *BF, 2.0)]))
    t.expect(rc == PASS_EXIT and rows[0]["verdict"] == "pass" and rows[0]["ratio"] == 1.0, f"pass: {rc} {rows}")
    t.expect("1 cases: 1 pass, 0 fail, 0 no choice" in out, f"pass summary: {out}")
    t.expect(out.splitlines()[1].split()[:4] == ["case", "class", "q/kv", "tuned"], f"table header: {out}")
    # 2.958 ms is 2% over 2.9 ms in decimal, though 2.9 * 1.02 rounds below 2.958 in binary.
    for tuned_ms, fastest_ms, verdict in ((1.02, 1.0, "pass"), (2.958, 2.9, "pass"), (1.0201, 1.0, "FAIL"),
                                          (1.03, 1.0, "FAIL")):
        rc, rows, _, _ = t.check(tuning, selected, bench_doc([("prompt_4k", FAST, [4096], *BF, tuned_ms),
                                                              ("prompt_4k", SLOW, [4096], *BF, fastest_ms)]))
        t.expect(rows and rows[0]["verdict"] == verdict and rc == (PASS_EXIT if verdict == "pass" else FAIL_EXIT),
                 f"{tuned_ms} ms against {fastest_ms}: {rc} {rows}")
        if verdict == "FAIL":
            t.expect(rows[0]["fastest"] == SLOW and f"{FAST} is {tuned_ms:.4f}x {SLOW}" in rows[0]["reasons"][0],
                     f"slower reason: {rows}")
    rc, rows, _, _ = t.check(tuning, bench_doc([("prompt_4k", SLOW, [4096], *BF, 2.0)]),
                             bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0), ("prompt_4k", SLOW, [4096], *BF, 2.0)]))
    t.expect(rc == FAIL_EXIT and rows[0]["reasons"] == [f"selected {SLOW} (2.000 ms side by side), the tuning file "
                                                        f"names {FAST}"],
             f"selected differs: {rc} {rows}")
    rc, rows, out, _ = t.check(tuning, selected, bench_doc([("prompt_4k", SLOW, [4096], *BF, 2.0)]))
    t.expect(rc == FAIL_EXIT and f"{FAST} not measured side by side" in rows[0]["reasons"] and
             rows[0]["ratio"] is None and rows[0]["tuned_ms"] is None, f"chosen not measured: {rc} {rows}")
    rc, rows, _, _ = t.check(tuning, selected, bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0)]))
    t.expect(rc == FAIL_EXIT and rows[0]["reasons"] == [f"candidates not measured side by side: {SLOW}"],
             f"candidate not measured: {rc} {rows}")
    rc, rows, _, _ = t.check(tuning, selected, bench_doc([("prompt_4k", FAST, [4096], "bf16", "e4m3", 1.0),
                                                          ("prompt_16k", FAST, [16384], *BF, 1.0)]))
    t.expect(rc == FAIL_EXIT and f"{FAST} not measured side by side" in rows[0]["reasons"],
             f"other dtypes and cases are not this case: {rc} {rows}")


def check_classes(t):
    """decode_single when total_q <= num_seqs, decode when total_q <= 8 * num_seqs, prefill_short when
    total_q < 8192, else prefill_long."""
    kernels = {"decode_single": "k_single", "decode": "k_decode", "prefill_short": "k_short", "prefill_long": "k_long"}
    tuning = tuning_doc([(c, *BF, k, [k]) for c, k in kernels.items()])
    shapes = [([1], "decode_single"), ([0], "decode_single"), ([1] * 64, "decode_single"), ([2, 0], "decode_single"),
              ([2, 1], "decode"), ([2], "decode"), ([8, 8], "decode"), ([16, 0], "decode"), ([9, 8], "prefill_short"),
              ([9], "prefill_short"), ([8191], "prefill_short"), ([4096, 4095], "prefill_short"),
              ([8192], "prefill_long"), ([4096, 4096], "prefill_long")]
    selected = bench_doc([(f"c{i}", kernels[cls], q_lens, *BF, 1.0) for i, (q_lens, cls) in enumerate(shapes)])
    side = bench_doc([(f"c{i}", kernels[cls], q_lens, *BF, 1.0) for i, (q_lens, cls) in enumerate(shapes)])
    rc, rows, out, _ = t.check(tuning, selected, side)
    t.expect(rc == PASS_EXIT and [r["class"] for r in rows] == [cls for _, cls in shapes],
             f"classes: {rc} {[(r['case'], r['class']) for r in rows]}")
    t.expect(f"{len(shapes)} cases: {len(shapes)} pass, 0 fail, 0 no choice" in out, f"classes summary: {out}")
    # The same batches with one kernel for every class: each selection of another class's kernel fails.
    wrong = bench_doc([(f"c{i}", "k_short", q_lens, *BF, 1.0) for i, (q_lens, _) in enumerate(shapes)])
    rc, rows, _, _ = t.check(tuning, wrong, side)
    t.expect(rc == FAIL_EXIT and [r["verdict"] == "pass" for r in rows] == [c == "prefill_short" for _, c in shapes],
             f"class decides the kernel: {[(r['case'], r['verdict']) for r in rows]}")


def check_no_choice(t):
    tuning = tuning_doc([("prefill_short", *BF, FAST, [FAST])])
    selected = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0), ("prompt_4k", "wgmma_e4m3q_d512", [4096], "e4m3",
                                                                  "e4m3", 1.0)])
    side = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0)])
    rc, rows, out, _ = t.check(tuning, selected, side)
    t.expect(rc == PASS_EXIT and [r["verdict"] for r in rows] == ["pass", "no choice"], f"no choice: {rc} {rows}")
    t.expect("2 cases: 1 pass, 0 fail, 1 no choice" in out, f"no choice summary: {out}")
    rc, rows, _, _ = t.check(tuning, selected, side, "--require-choice")
    t.expect(rc == FAIL_EXIT and rows[1]["verdict"] == "FAIL" and "no choice for prefill_short e4m3/e4m3" in
             rows[1]["reasons"][0], f"--require-choice: {rc} {rows}")
    md = os.path.join(t.tmp, "out.md")
    rc, _, _, _ = t.check(tuning, selected, side, "--markdown", md)
    lines = open(md).read().splitlines() if os.path.exists(md) else []
    t.expect(rc == PASS_EXIT and len(lines) == 6 and lines[2].startswith("| case | class | q/kv | tuned |") and
             lines[5].startswith("| prompt_4k | prefill_short | e4m3/e4m3 | - |"), f"--markdown: {lines}")


def bad_input_cases(t):
    """(what, tuning, selected, side, extra args, text the message must hold)."""
    good_t = tuning_doc([("prefill_short", *BF, FAST, [FAST])])
    good_b = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0)])
    missing = os.path.join(t.tmp, "absent.json")
    no_ms = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0), ("prompt_4k", SLOW, [4096], *BF, 1.0)])
    del no_ms["cases"][1]["median_ms"]
    twice = tuning_doc([("decode", *BF, FAST, [FAST]), ("decode", *BF, SLOW, [SLOW])])
    sbs = bench_doc([("prompt_4k", FAST, [4096], *BF, 1.0), ("prompt_4k", SLOW, [4096], *BF, 2.0)])
    return [
        ("missing tuning", missing, good_b, good_b, [], f"--tuning: cannot read '{missing}'"),
        ("missing side", good_t, good_b, missing, [], f"--side-by-side: cannot read '{missing}'"),
        ("not JSON", Raw("{\"format\": 1,"), good_b, good_b, [], "is not valid JSON"),
        ("NaN", good_t, good_b, Raw(json.dumps(good_b).replace("1.0", "NaN")), [], "is not valid JSON"),
        ("tool", good_t, {"tool": "peer_bench", "cases": []}, good_b, [], "field 'tool' must be 'wideattn bench'"),
        ("cases", good_t, {"tool": "wideattn bench"}, good_b, [], "field 'cases' must be an array"),
        ("median_ms", good_t, good_b, no_ms, [], "field 'cases[1].median_ms' must be a number"),
        ("q_lens", good_t, bench_doc([("p", FAST, [], *BF, 1.0)]), good_b, [], "field 'cases[0].q_lens'"),
        ("dtype", good_t, bench_doc([("p", FAST, [1], "fp8", "bf16", 1.0)]), good_b, [], "field 'cases[0].q_dtype'"),
        ("format", dict(good_t, format=2), good_b, good_b, [], "field 'format' must be 1"),
        ("checksum", dict(good_t, bundle_checksum="XYZ"), good_b, good_b, [], "field 'bundle_checksum'"),
        ("cc", dict(good_t, device={"name": "H200", "cc_major": 9.0, "cc_minor": 0, "driver_version": 1}), good_b,
         good_b, [], "field 'device.cc_major' must be an integer"),
        ("class", tuning_doc([("prefill", *BF, FAST, [FAST])]), good_b, good_b, [], "field 'choices[0].class'"),
        ("timings", tuning_doc([("decode", *BF, FAST, [""])]), good_b, good_b, [],
         "field 'choices[0].timings[0].kernel'"),
        ("twice", twice, good_b, good_b, [], "field 'choices[1]' must be the only choice for decode bf16/bf16"),
        ("side-by-side as selected", good_t, sbs, sbs, [], "a --kernels run? pass it to --side-by-side"),
        ("no cases", good_t, bench_doc([]), good_b, [], "have no cases"),
        ("shape", good_t, good_b, bench_doc([("prompt_4k", FAST, [4095], *BF, 1.0)]), [], "has q_lens [4096] in"),
        ("tolerance", good_t, good_b, good_b, ["--tolerance", "-1"], "--tolerance='-1' is not"),
        ("tolerance nan", good_t, good_b, good_b, ["--tolerance", "nan"], "--tolerance='nan' is not"),
    ]


def check_bad_input(t):
    for what, tuning, selected, side, extra, message in bad_input_cases(t):
        rc, rows, out, err = t.check(tuning, selected, side, *extra)
        t.expect(rc == BAD_EXIT and message in err and not rows, f"{what}: exit {rc}, stderr {err!r}")
    r = t.run("--tuning", t.write("t.json", tuning_doc([])), "--side-by-side", t.write("b.json", bench_doc([])))
    t.expect(r.returncode == BAD_EXIT and "--selected needs at least one" in r.stderr, f"no --selected: {r.stderr}")
    r = t.run("--selected", "x.json")
    t.expect(r.returncode == BAD_EXIT and "--tuning" in r.stderr, f"no --tuning: {r.stderr}")


REAL_Q_LENS = {"prompt_4k": [4096], "decode_32_ctx_16k": [1] * 32}
REAL_CANDIDATES = "wgmma_bf16_d512,mma_bf16_d512,mma_bf16_d512_pp,mma_e4m3_d512,wgmma_e4m3q_d512,mma_e4m3q_d512"


def real_runs(tuning_path, faster=None):
    """Selected and side-by-side reports made from the real file's own per-case medians; faster =
    (kernel, case, factor) sets that kernel's median to the chosen kernel's / factor."""
    doc = json.load(open(tuning_path))
    selected, side = [], []
    for choice in doc["choices"]:
        dtypes = (choice["q_dtype"], choice["kv_dtype"])
        medians = {(t["kernel"], c["case"]): c["median_ms"] for t in choice["timings"] for c in t["cases"]}
        for (kernel, case), ms in medians.items():
            if faster and (kernel, case) == faster[:2]:
                ms = medians[(choice["kernel"], case)] / faster[2]
            side.append((case, kernel, REAL_Q_LENS[case], *dtypes, ms))
            if kernel == choice["kernel"]:
                selected.append((case, kernel, REAL_Q_LENS[case], *dtypes, ms))
    selected.append(("prompt_16k", FAST, [16384], *BF, 19.7))
    side.append(("prompt_16k", FAST, [16384], *BF, 19.7))
    return bench_doc(selected), bench_doc(side)


def check_real_tuning(t, tuning_path):
    """The file of 2026-12-01 predates decode_single: its decode choices (timed on decode_32_ctx_16k,
    one token per sequence) apply to multi-token decode only, so that case has no choice now."""
    r = t.run("--tuning", tuning_path, "--list-candidates")
    t.expect(r.returncode == PASS_EXIT and r.stdout.strip() == REAL_CANDIDATES, f"--list-candidates: {r.stdout}")
    rc, rows, out, _ = t.check(tuning_path, *real_runs(tuning_path))
    t.expect(rc == PASS_EXIT and "7 cases: 3 pass, 0 fail, 4 no choice" in out, f"real file: {rc} {out}")
    t.expect(rows and rows[-1]["class"] == "prefill_long" and rows[-1]["verdict"] == "no choice", f"real: {rows}")
    decode = [r for r in rows if r["case"] == "decode_32_ctx_16k"]
    t.expect(len(decode) == 3 and all(r["class"] == "decode_single" and r["tuned"] is None and
                                      r["verdict"] == "no choice" for r in decode), f"real decode: {decode}")
    rc, rows, _, _ = t.check(tuning_path, *real_runs(tuning_path), "--require-choice")
    t.expect(rc == FAIL_EXIT and "no choice for decode_single e4m3/e4m3" in " ".join(sum((r["reasons"] for r in rows),
                                                                                          [])),
             f"real file, --require-choice: {rc} {rows}")
    for factor, code in ((1.015, PASS_EXIT), (1.025, FAIL_EXIT)):
        rc, rows, _, _ = t.check(tuning_path, *real_runs(tuning_path, (SLOW, "prompt_4k", factor)))
        t.expect(rc == code, f"real file, {SLOW} {factor}x faster than the choice at prompt_4k: exit {rc}")
    r = t.run("--tuning", tuning_path, "--selected", t.write("sel.json", real_runs(tuning_path)[0]),
              "--side-by-side", t.write("sbs.json", real_runs(tuning_path)[1]))
    t.expect("note: the tuning file was written on" not in r.stdout, f"same device, no note: {r.stdout}")
    r = t.run("--tuning", tuning_path, "--selected", t.write("sel.json", bench_doc([("prompt_4k", FAST, [4096], *BF,
                                                                                   1.0)], gpu="NVIDIA B200")),
              "--side-by-side", t.write("sbs.json", real_runs(tuning_path)[1]))
    t.expect("the --selected reports ran on 'NVIDIA B200'" in r.stdout, f"device note: {r.stdout}")


# The stand-in CLI of the gpu_suite.sh run: every command line goes to the real CLI first, which
# must stop for want of a driver (so its arguments and, for a selected run, the tuning file passed
# the real parser); then it writes what the GPU run would: the tuning file (per class and dtypes
# the kernel of the lowest priority, unlike the priority order; a single_token kernel a candidate
# of decode_single only, as `wideattn tune` has it) and the bench reports (the chosen kernel
# fastest, or with STUB_FASTER the class's candidate of the highest priority 5% faster than it;
# with --kernels a single_token kernel skipped on cases of more than one token per sequence).
# A case's batch is read from its name: decode_N_* N single tokens, verifyK_N_* N of K tokens,
# prompt_Nk / chunk_Nk_* N x 1024 tokens, any other 4096.
STUB = r'''
import json, os, re, subprocess, sys
args = sys.argv[1:]
env = dict(os.environ, WIDEATTN_LIBCUDA="/nonexistent/libcuda.so.1")
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "tuning": os.environ.get("WIDEATTN_TUNING")}) + "\n")
real = subprocess.run([os.environ["REAL_CLI"]] + args, env=env, capture_output=True, text=True)
if args[:1] == ["inspect"] or args[:2] == ["bench", "--list"]:
    sys.stdout.write(real.stdout)
    sys.exit(real.returncode)
if real.returncode != 2 or "WIDEATTN_ERROR_NO_DRIVER" not in real.stderr:
    sys.exit("the real CLI refused " + " ".join(args) + ": " + real.stderr)
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
manifest_path = os.path.join(os.environ["WIDEATTN_BUNDLE"], "manifest.json")
# As `wideattn tune`: a kernel that reads V only in the transposed layout serves no engine-layout call.
kernels = [k for k in json.load(open(manifest_path))["kernels"]
           if k["kind"] == "prefill" and k["o_dtype"] == "bf16" and "v_transposed" not in k["features"]]
single = {k["name"] for k in kernels if "single_token" in k["features"]}
combos = {}
for k in kernels:
    combos.setdefault((k["q_dtype"], k["kv_dtype"]), {})[k["name"]] = k["priority"]
CLASSES = ("decode_single", "decode", "prefill_short", "prefill_long")
def q_lens(case):
    m = re.match(r"decode_(\d+)_", case)
    if m:
        return [1] * int(m.group(1))
    m = re.match(r"verify(\d+)_(\d+)_", case)
    if m:
        return [int(m.group(1))] * int(m.group(2))
    m = re.match(r"(prompt|chunk)_(\d+)k", case)
    return [int(m.group(2)) * 1024] if m else [4096]
def shape_class(lens):
    total, seqs = sum(lens), len(lens)
    return ("decode_single" if total <= seqs else "decode" if total <= 8 * seqs else
            "prefill_short" if total < 8192 else "prefill_long")
def candidates(cls, q, kv):
    return {n: p for n, p in combos[(q, kv)].items() if cls == "decode_single" or n not in single}
def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h
if args[0] == "tune":
    choices = []
    for (q, kv) in combos:
        for c in CLASSES:
            names = candidates(c, q, kv)
            choices.append({"class": c, "q_dtype": q, "kv_dtype": kv, "kernel": min(names, key=names.get),
                            "timings": [{"kernel": n, "total_ms": 1.0,
                                         "cases": [{"case": "prompt_4k", "median_ms": 1.0}]} for n in names]})
    doc = {"format": 1, "device": {"name": "NVIDIA H200", "cc_major": 9, "cc_minor": 0, "driver_version": 13000},
           "bundle_checksum": fnv1a64(open(manifest_path, "rb").read()), "choices": choices}
    json.dump(doc, open(opt("--out"), "w"))
    sys.exit(0)
tuned = {}
if os.environ.get("WIDEATTN_TUNING", "off") != "off":
    tuned = {(c["class"], c["q_dtype"], c["kv_dtype"]): c["kernel"]
             for c in json.load(open(os.environ["WIDEATTN_TUNING"]))["choices"]}
def record(case, name, q, kv):
    names = candidates(shape_class(q_lens(case)), q, kv)
    chosen, first = min(names, key=names.get), max(names, key=names.get)
    ms = 1.0 if name == chosen else 0.95 if name == first and os.environ.get("STUB_FASTER") else 1.5
    return {"case": case, "kernel": name, "q_lens": q_lens(case), "q_dtype": q, "kv_dtype": kv, "median_ms": ms}
if opt("--kernels"):
    by_name = {k["name"]: k for k in kernels}
    cases = [record(c, n, by_name[n]["q_dtype"], by_name[n]["kv_dtype"])
             for c in opt("--cases").split(",") for n in opt("--kernels").split(",")
             if n not in single or sum(q_lens(c)) <= len(q_lens(c))]
else:
    q, kv = opt("--q-dtype", "bf16"), opt("--kv-dtype", "bf16")
    cases = []
    for c in opt("--cases").split(","):
        names = candidates(shape_class(q_lens(c)), q, kv)
        cases.append(record(c, tuned.get((shape_class(q_lens(c)), q, kv), max(names, key=names.get)), q, kv))
json.dump({"tool": "wideattn bench", "gpu": "NVIDIA H200", "cases": cases}, open(opt("--json"), "w"))
'''


def run_suite(t, suite, cli, bundle, faster=False):
    """(summary lines, check_tuning.json or None, logged calls) of gpu_suite.sh --only-tune."""
    run_dir = tempfile.mkdtemp(dir=t.tmp)
    build = os.path.join(run_dir, "build")
    os.makedirs(os.path.join(build, "tools"))
    os.symlink(os.path.abspath(bundle), os.path.join(build, "bundle"))
    stub = os.path.join(build, "tools", "wideattn")
    with open(stub, "w") as f:
        f.write(f"#!{sys.executable}\n{STUB}")
    os.chmod(stub, 0o755)
    out, log = os.path.join(run_dir, "out"), os.path.join(run_dir, "calls.jsonl")
    env = dict(os.environ, OUT=out, WIDEATTN_BUILD_DIR=build, WIDEATTN_COMMIT="test", STUB_LOG=log,
               REAL_CLI=os.path.abspath(cli))
    env.pop("WIDEATTN_TUNING", None)
    if faster:
        env["STUB_FASTER"] = "1"
    r = subprocess.run(["bash", suite, "--only-tune"], env=env, capture_output=True, text=True, timeout=300)
    summary = r.stdout.split("== summary (commit test)\n")[-1].splitlines()
    check = None
    with tarfile.open(os.path.join(out, "suite.tar.gz")) as tar:
        if "check_tuning.json" in tar.getnames():
            check = json.load(tar.extractfile("check_tuning.json"))
        t.expect("check_tuning.md" in tar.getnames() and "tuning.json" in tar.getnames(), f"archive: {tar.getnames()}")
    calls = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    return summary, check, calls


def check_gpu_suite(t, suite, cli, bundle):
    summary, check, calls = run_suite(t, suite, cli, bundle)
    steps = {line.split()[0]: line.split()[1] for line in summary if line.split()}
    t.expect(steps == {"inspect": "rc=0", "tune": "rc=0", "tuned-bf16": "rc=0", "tuned-e4m3kv": "rc=0",
                       "tuned-e4m3q": "rc=0", "tune-kernels": "rc=0", "tuned-sbs": "rc=0", "tune-check": "rc=0"},
               f"gpu_suite --only-tune steps: {summary}")
    cases = subprocess.run([cli, "bench", "--list"], capture_output=True, text=True).stdout.count("\n")
    t.expect(check is not None and check["summary"] == f"{3 * cases} cases: {3 * cases} pass, 0 fail, 0 no choice",
             f"gpu_suite check: {check and check['summary']}")
    tuning = [c for c in calls if c["args"][0] == "tune"]
    t.expect(len(tuning) == 1 and tuning[0]["args"][1] == "--out" and tuning[0]["args"][2].endswith("/out/tuning.json"),
             f"tune call: {tuning}")
    benches = [c for c in calls if c["args"][0] == "bench" and "--json" in c["args"]]
    selected = [c for c in benches if "--kernels" not in c["args"]]
    t.expect(len(selected) == 3 and all(c["tuning"] == tuning[0]["args"][2] for c in selected),
             f"selected runs with the tuning file: {selected}")
    side = [c for c in benches if "--kernels" in c["args"]]
    # One list for every class: every prefill kernel `wideattn tune` times, the bundle's but the fp64
    # reference and the kernels of the transposed V layout (which the tuner's caches do not have);
    # the single_token kernels among them (timed for decode_single) run only on that class's cases.
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    tuned = {k["name"] for k in manifest["kernels"] if k["kind"] == "prefill" and k["o_dtype"] != "f64" and
             "v_transposed" not in k["features"]}
    t.expect(len(side) == 1 and side[0]["tuning"] == "off" and
             set(side[0]["args"][side[0]["args"].index("--kernels") + 1].split(",")) == tuned, f"side by side: {side}")
    classes = {r["class"] for r in (check or {}).get("rows", [])}
    t.expect(classes == {"decode_single", "decode", "prefill_short", "prefill_long"}, f"classes checked: {classes}")
    summary, check, _ = run_suite(t, suite, cli, bundle, faster=True)
    t.expect(any(line.startswith("tune-check") and "rc=1" in line for line in summary), f"a faster kernel: {summary}")
    t.expect(check is not None and check["summary"] == f"{3 * cases} cases: 0 pass, {3 * cases} fail, 0 no choice",
             f"faster kernels: {check and check['summary']}")


def main():
    script, real_tuning, suite, cli, bundle = sys.argv[1:6]
    with tempfile.TemporaryDirectory() as tmp:
        t = Checker(script, tmp)
        for part in (check_verdicts, check_classes, check_no_choice, check_bad_input):
            part(t)
        check_real_tuning(t, real_tuning)
        check_gpu_suite(t, suite, cli, bundle)
    for what in t.failures:
        print("FAIL:", what)
    print(f"check_tuning: {len(t.failures)} failure(s)")
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
