#!/usr/bin/env python3
"""Runs `wideattn tune` and `wideattn bench` end to end on the stand-in driver (launches run
nothing; events time the host) and checks what does not depend on the times: tune times a
single_token kernel only on decode_single cases and a few_tokens kernel only on decode_single
and decode cases (every class of the tuning file names its candidates) and a k_from_v_only kernel
on none, bench --kernels skips them on the other cases with a note, bench runs a k_from_v_only
kernel (K-from-V calls; the first of each K/V dtype) with --kernels on decode_single cases and with
--kernel, a bench with the tuning
file in force runs the file's choice per class, and tools/bench/check_tuning.py (with a
tolerance no time can exceed) passes every case with --require-choice; and bench --timing queued
runs with its spin probe ahead of each call, saying so in its output and JSON.
usage: tune_fake_driver_check.py WIDEATTN_CLI CHECK_TUNING_PY BUNDLE_DIR FAKE_LIBCUDA
"""
import json
import os
import subprocess
import sys
import tempfile

# One case of each class the three hold: decode_single, decode (q_len 5), prefill_short.
CASES = {"decode_1_ctx_32k": "decode_single", "verify5_1_ctx_20k": "decode", "prompt_4k": "prefill_short"}
TIMEOUT_S = 240
ANY_TIME = "1e9"
EXIT_SKIP = 77    # meson: the test is skipped  # check_tuning.py --tolerance: only the selection and the candidates decide


def main():
    cli, checker, bundle, fake = sys.argv[1:5]
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    env = dict(os.environ, WIDEATTN_BUNDLE=bundle, WIDEATTN_LIBCUDA=fake, WIDEATTN_TUNING="off")
    quick = ["--cases", ",".join(CASES), "--reps", "1", "--warmup", "0"]

    def run(args, **extra):
        return subprocess.run(args, env=dict(env, **extra), capture_output=True, text=True, timeout=TIMEOUT_S)

    manifest = json.load(open(os.path.join(bundle, "manifest.json")))["kernels"]
    # The classes each token-limited kernel is timed in (selection runs it alone only there); a
    # k_from_v_only kernel in none (tune and bench make K+V calls, which selection never gives it),
    # nor a v_transposed one (tune's calls read V in the engine layout, which it does not serve).
    limited_classes = {"single_token": {"decode_single"}, "few_tokens": {"decode_single", "decode"}}
    k_from_v_only = {k["name"] for k in manifest if k["kind"] == "prefill" and "k_from_v_only" in k["features"]}
    allowed = {k["name"]: (feature, classes) for k in manifest if k["kind"] == "prefill"
               and k["name"] not in k_from_v_only and "v_transposed" not in k["features"]
               for feature, classes in limited_classes.items() if feature in k["features"]}
    single = {name for name, (feature, _) in allowed.items() if feature == "single_token"}
    if not single:
        print("tune_fake_driver: the bundle has no single_token kernel (no sm_90a build): skipped")
        return EXIT_SKIP
    with tempfile.TemporaryDirectory() as tmp:
        # bench --timing queued: the spin probe ahead of each timed call, named in the output and JSON.
        queued = os.path.join(tmp, "queued.json")
        r = run([cli, "bench", "--timing", "queued", "--cases", "decode_64_ctx_4k", "--reps", "2", "--warmup", "1",
                 "--json", queued])
        expect(r.returncode == 0 and "timing: each call queued behind a 300 us wait on the GPU" in r.stdout,
               f"bench --timing queued: exit {r.returncode}: {r.stdout}{r.stderr}")
        if r.returncode == 0:
            expect(json.load(open(queued)).get("timing") == "queued", "bench --timing queued: JSON timing")
        tuning = os.path.join(tmp, "tuning.json")
        r = run([cli, "tune", *quick, "--out", tuning])
        expect(r.returncode == 0, f"tune: exit {r.returncode}: {r.stdout}{r.stderr}")
        if r.returncode != 0:
            return report(failures)
        for line in r.stdout.splitlines():
            words = line.split()
            expect(not (len(words) > 3 and words[0] in CASES and words[3] in allowed and
                        CASES[words[0]] not in allowed[words[3]][1]),
                   f"tune timed a token-limited kernel on a case it does not serve alone: {line}")
        choices = json.load(open(tuning))["choices"]
        by_class = {}
        for c in choices:
            timed = {t["kernel"] for t in c["timings"]}
            by_class[(c["class"], c["q_dtype"], c["kv_dtype"])] = c["kernel"]
            mine = {k["name"] for k in manifest if k["name"] in allowed and k["q_dtype"] == c["q_dtype"] and
                    k["kv_dtype"] == c["kv_dtype"]}
            serving = {name for name in mine if c["class"] in allowed[name][1]}
            expect(serving <= timed, f"{c['class']} {c['q_dtype']}/{c['kv_dtype']} did not time {serving - timed}")
            expect(not timed & (mine - serving), f"{c['class']} timed token-limited kernels {timed & (mine - serving)}")
            expect(not timed & k_from_v_only, f"{c['class']} timed k_from_v_only kernels {timed & k_from_v_only}")
        expect({cls for cls, _, _ in by_class} == set(CASES.values()), f"classes of the file: {sorted(by_class)}")

        listed = subprocess.run([sys.executable, checker, "--tuning", tuning, "--list-candidates"],
                                capture_output=True, text=True).stdout.strip()
        expect(set(allowed) <= set(listed.split(",")), f"--list-candidates lacks token-limited kernels: {listed}")
        # bench runs a k_from_v_only kernel with K-from-V calls: the single_token rule with --kernels,
        # every case with --kernel (the decode case here: a pinned decode kernel on a prompt is slow).
        # The rule is bench's, not a kernel's: one such kernel of each K/V dtype, the one selection
        # ranks first (a bundle with candidate kernels holds several of a dtype, each minutes here).
        first_of_dtype = {}
        for k in sorted(manifest, key=lambda k: -k["priority"]):
            if k["name"] in k_from_v_only:
                first_of_dtype.setdefault(k["kv_dtype"], k["name"])
        for name in sorted(first_of_dtype.values()):
            kfv_json = os.path.join(tmp, "kfv.json")
            r = run([cli, "bench", "--kernels", name, *quick, "--json", kfv_json])
            expect(r.returncode == 0, f"bench --kernels {name}: exit {r.returncode}: {r.stdout}{r.stderr}")
            if r.returncode == 0:
                ran = {c["case"] for c in json.load(open(kfv_json))["cases"] if c["kernel"] == name}
                expect(ran == {c for c, cls in CASES.items() if cls == "decode_single"},
                       f"bench --kernels {name} ran {ran}")
            kv_dtype = next(k["kv_dtype"] for k in manifest if k["name"] == name)
            r = run([cli, "bench", "--kernel", name, "--kv-dtype", kv_dtype, "--cases", "decode_1_ctx_32k", "--reps",
                     "1", "--warmup", "0", "--json", kfv_json])
            ran = {c["kernel"] for c in json.load(open(kfv_json))["cases"]} if r.returncode == 0 else set()
            expect(r.returncode == 0 and ran == {name},
                   f"bench --kernel {name}: exit {r.returncode}, ran {ran}: {r.stdout}{r.stderr}")
        side = os.path.join(tmp, "side.json")
        r = run([cli, "bench", "--kernels", listed, *quick, "--json", side])
        expect(r.returncode == 0, f"bench --kernels: exit {r.returncode}: {r.stdout}{r.stderr}")
        for case, cls in CASES.items():
            for name, (feature, classes) in allowed.items():
                note = f"note: {name} skipped: a {feature} kernel"
                noted = any(line.startswith(case + " ") and note in line for line in r.stdout.splitlines())
                expect(noted == (cls not in classes), f"bench --kernels note for {name} on {case}: {noted}")
        if os.path.exists(side):
            ran = {(c["case"], c["kernel"]) for c in json.load(open(side))["cases"]}
            for case, cls in CASES.items():
                here = {n for c, n in ran if c == case}
                serving = {name for name, (_, classes) in allowed.items() if cls in classes}
                expect(here >= serving and not here & (set(allowed) - serving), f"side by side, {case}: {here}")

        # bench --suite decode: bf16, e4m3 and e4m3 over a transposed V cache, each case; the
        # transposed variant runs kernels that read that layout (single-token decode: a
        # single_token one), and the mixed batch has a ratio for each variant.
        suite_json = os.path.join(tmp, "decode_suite.json")
        mixed_cases = "mixed_chunk_2k_decode_63,chunk_2k_ctx_4k,decode_63_ctx_8k"
        r = run([cli, "bench", "--suite", "decode", "--cases", mixed_cases, "--reps", "1", "--warmup", "0",
                 "--json", suite_json])
        expect(r.returncode == 0, f"bench --suite decode: exit {r.returncode}: {r.stdout}{r.stderr}")
        if r.returncode == 0:
            report_json = json.load(open(suite_json))
            features = {k["name"]: k["features"] for k in manifest}
            for case in mixed_cases.split(","):
                rows = [c for c in report_json["cases"] if c["case"] == case]
                layouts = sorted((c["kv_dtype"], c.get("v_transposed", False)) for c in rows)
                expect(layouts == [("bf16", False), ("e4m3", False), ("e4m3", True)],
                       f"bench --suite decode, {case}: variants {layouts}")
                for c in rows:
                    expect(("v_transposed" in features[c["kernel"]]) == c.get("v_transposed", False),
                           f"bench --suite decode, {case}: {c['kernel']} for v_transposed={c.get('v_transposed')}")
                expect(f"{case} vT " in r.stdout, f"bench --suite decode: no '{case} vT' row")
            single = [c for c in report_json["cases"] if c["case"] == "decode_63_ctx_8k" and c.get("v_transposed")]
            expect(bool(single) and "single_token" in features[single[0]["kernel"]],
                   f"bench --suite decode: the transposed single-token decode ran {single}")
            ratios = report_json.get("mixed_batch_ratios", [])
            expect(sorted(m.get("v_transposed", False) for m in ratios) == [False, False, True],
                   f"bench --suite decode: mixed_batch_ratios {ratios}")

        selected = os.path.join(tmp, "selected.json")
        r = run([cli, "bench", *quick, "--kv-dtype", "e4m3", "--json", selected], WIDEATTN_TUNING=tuning)
        expect(r.returncode == 0, f"bench with the tuning file: exit {r.returncode}: {r.stdout}{r.stderr}")
        if os.path.exists(selected):
            for c in json.load(open(selected))["cases"]:
                chosen = by_class.get((CASES[c["case"]], c["q_dtype"], c["kv_dtype"]))
                expect(c["kernel"] == chosen, f"{c['case']} ran {c['kernel']}, the file names {chosen}")
            r = subprocess.run([sys.executable, checker, "--tuning", tuning, "--selected", selected, "--side-by-side",
                                side, "--tolerance", ANY_TIME, "--require-choice"], capture_output=True, text=True)
            expect(r.returncode == 0 and f"{len(CASES)} cases: {len(CASES)} pass" in r.stdout,
                   f"check_tuning.py: exit {r.returncode}: {r.stdout}{r.stderr}")
    return report(failures)


def report(failures):
    for what in failures:
        print("FAIL:", what)
    print(f"tune_fake_driver: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
