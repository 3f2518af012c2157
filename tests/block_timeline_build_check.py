#!/usr/bin/env python3
"""Checks that the block-timeline diagnostic still builds in both its forms
(kernels/common/block_timeline.cuh): the kernels that carry the hook compiled by
tools/build/compile_cubin.py with -DWIDEATTN_BLOCK_TIMELINE (their cubins hold the line format that
tools/bench/block_timeline.py reads) and with -DWIDEATTN_BLOCK_TIMELINE_RECORDS (their cubins hold
the records and count symbols that `wideattn bench --block-timeline` reads back; compile_cubin
refuses a build whose wgmma ptxas serialized, so a hooked wgmma kernel stays unserialized), as the
README tells; and no cubin of the built bundle holds either (the diagnostic never ships). Kernels
whose arch is not configured are skipped.

With CLI, FAKE_LIBCUDA, VARIANT_BUNDLE and SUMMARY (the `wideattn` CLI, tests/fake_driver's
stand-in driver, tools/gpu/variant_bundle.py, tools/bench/block_timeline.py) it also runs
`wideattn bench --block-timeline` end to end on the stand-in driver, whose launches append a
record per block to a records-form module as the hooked kernels do: on a variant bundle of the
records-form cubins each case prints the records of its own launches only (warm-up and timed,
cleared between cases) for the split kernel and the merge it ran, and the summary reads them
back as launches; on the bundle itself a note says no kernel keeps records.

usage: block_timeline_build_check.py COMPILE_CUBIN NVCC SOURCE_ROOT ARCH[,ARCH...] BUNDLE_DIR
                                     [CLI FAKE_LIBCUDA VARIANT_BUNDLE SUMMARY]
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

PRINTF = "-DWIDEATTN_BLOCK_TIMELINE"
RECORDS = "-DWIDEATTN_BLOCK_TIMELINE_RECORDS"
# (kernel, source, entry, split entry, lowest arch number, only these archs or None, forms)
HOOKED = [
    ("decode_bf16_d512", "kernels/decode_bf16_d512/kernel.cu", "wideattn_decode_bf16_d512",
     "wideattn_decode_bf16_d512_split", 90, {"sm_90a"}, (PRINTF, RECORDS)),
    ("decode_bf16w4_d512", "kernels/decode_bf16_d512/kernel_w4.cu", "wideattn_decode_bf16w4_d512",
     "wideattn_decode_bf16w4_d512_split", 90, {"sm_90a"}, (PRINTF, RECORDS)),
    ("merge_splits_bf16", "kernels/merge/splits_bf16/kernel.cu", "wideattn_merge_splits_bf16", "", 80, None,
     (PRINTF, RECORDS)),
    ("merge_splits_bf16_rows", "kernels/merge/splits_bf16_rows/kernel.cu", "wideattn_merge_splits_bf16_rows", "",
     80, None, (PRINTF, RECORDS)),
    # printf would serialize its wgmma: the records form only.
    ("wgmma_bf16_d512", "kernels/hopper/bf16_d512/kernel.cu", "wideattn_wgmma_bf16_d512",
     "wideattn_wgmma_bf16_d512_split", 90, {"sm_90a"}, (RECORDS,)),
]
# What each form leaves in the cubin: the printf format, or the records' and count's symbols.
MARKS = {PRINTF: (b"wideattn-timeline %s",),
         RECORDS: (b"wideattn_block_timeline_records", b"wideattn_block_timeline_count")}


def arch_number(arch):
    return int(arch[3:].rstrip("a"))


# The end-to-end cases: each case's split kernel and merge (the dispatcher's choice on sm_90a).
E2E_CASES = {"verify5_1_ctx_20k": {"wgmma_bf16_d512_split", "merge_splits_bf16_rows"},
             "decode_1_ctx_32k": {"decode_bf16w4_d512_split", "merge_splits_bf16_rows"}}
E2E_WARMUP, E2E_REPS = 1, 2
E2E_LAUNCHES = E2E_WARMUP + E2E_REPS  # of each case's split kernel and of its merge
NOTE = "no kernel of this case keeps block records"


def run_bench(cli, fake, bundle, cases):
    env = dict(os.environ, WIDEATTN_LIBCUDA=fake, WIDEATTN_TUNING="off")
    cmd = [cli, "bench", "--bundle", bundle, "--cases", ",".join(cases), "--warmup", str(E2E_WARMUP),
           "--reps", str(E2E_REPS), "--block-timeline"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def lines_by_case(stdout, cases):
    """The timeline lines and notes after each case's row, up to the next case's row."""
    found, current = {}, None
    for line in stdout.splitlines():
        first = line.split(" ", 1)[0]
        if first in cases and first not in found:
            current = first
            found[current] = {"names": {}, "notes": []}
        elif current and line.startswith("wideattn-timeline "):
            name = line.split()[1]
            found[current]["names"][name] = found[current]["names"].get(name, 0) + 1
        if current and NOTE in line:
            found[current]["notes"].append(line)
    return found


def end_to_end(tmp, records_dir, bundle, cli, fake, variant_bundle, summary):
    """Returns the number of failed checks of `wideattn bench --block-timeline` on the stand-in driver."""
    failures = 0

    def check(ok, what, detail=""):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures += 1
            if detail:
                print(detail[-3000:])

    variant = os.path.join(tmp, "variant")
    cubins = sorted(os.path.join(records_dir, f) for f in os.listdir(records_dir) if f.endswith(".cubin"))
    r = subprocess.run([sys.executable, variant_bundle, "--base", bundle, "--out", variant] + cubins,
                       capture_output=True, text=True)
    check(r.returncode == 0, f"variant bundle of the {len(cubins)} records-form cubins", r.stdout + r.stderr)
    if r.returncode != 0:
        return failures
    cases = list(E2E_CASES)
    r = run_bench(cli, fake, variant, cases)
    check(r.returncode == 0, "bench --block-timeline on the variant bundle exits 0", r.stdout + r.stderr)
    found = lines_by_case(r.stdout, cases)
    for case, names in E2E_CASES.items():
        got = found.get(case, {"names": {}, "notes": []})
        counts = got["names"]
        check(set(counts) == names and all(n > 0 and n % E2E_LAUNCHES == 0 for n in counts.values())
              and not got["notes"],
              f"{case}: records of {sorted(names)} only, a whole number of its {E2E_LAUNCHES} launches each "
              f"(got {counts})", r.stdout)
    out = os.path.join(tmp, "timeline.txt")
    with open(out, "w") as f:
        f.write(r.stdout)
    s = subprocess.run([sys.executable, summary, out, "--json", "-"], capture_output=True, text=True)
    launches = json.loads(s.stdout)["launches"] if s.returncode == 0 else []
    per_name = dict(collections.Counter(launch.get("name") for launch in launches))
    expected = {name: E2E_LAUNCHES * n
                for name, n in collections.Counter(n for names in E2E_CASES.values() for n in names).items()}
    check(per_name == expected, f"block_timeline.py reads the launches back: {per_name}", s.stdout + s.stderr)
    r = run_bench(cli, fake, bundle, cases[:1])
    got = lines_by_case(r.stdout, cases[:1]).get(cases[0], {"names": {}, "notes": []})
    check(r.returncode == 0 and not got["names"] and len(got["notes"]) == 1,
          "on the bundle itself: no records, one note", r.stdout + r.stderr)
    return failures


def main(argv):
    if len(argv) not in (5, 9):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    compile_cubin, nvcc, root, archs, bundle = argv[0], argv[1], argv[2], [a for a in argv[3].split(",") if a], argv[4]
    failures = checked = 0
    shipped = sorted(f for f in os.listdir(bundle) if f.endswith(".cubin"))
    every_mark = [m for marks in MARKS.values() for m in marks]
    marked = [f for f in shipped if any(m in open(os.path.join(bundle, f), "rb").read() for m in every_mark)]
    print(("ok   " if shipped and not marked else "FAIL ") +
          f"none of the bundle's {len(shipped)} cubins carries the timeline {marked}")
    failures += 0 if shipped and not marked else 1
    with tempfile.TemporaryDirectory() as tmp:
        # The records-form cubins under their bundle names, with their resources (the end-to-end part).
        records_dir = os.path.join(tmp, "records")
        os.makedirs(records_dir)
        for name, source, entry, split_entry, min_sm, only, forms in HOOKED:
            usable = [a for a in archs if arch_number(a) >= min_sm and (only is None or a in only)]
            if not usable:
                print(f"skip {name}: none of {archs} builds it")
                continue
            # sm_90a where configured: the arch of the end-to-end part's cases (the stand-in driver
            # reports sm_90, so the bundle's sm_90a cubins are the ones it loads).
            arch = "sm_90a" if "sm_90a" in usable else usable[0]
            for form in forms:
                out = os.path.join(tmp, f"{name}.{form.lstrip('-')}.{arch}.cubin")
                cmd = [sys.executable, compile_cubin, "--nvcc", nvcc, "--include", root, "--include",
                       os.path.join(root, "include"), "--arch", arch, "--symbol", entry, "--allow-spills",
                       "--src", os.path.join(root, source), "--out", out, "--resources", out + ".resources",
                       "--depfile", out + ".d"]
                if split_entry:
                    cmd += ["--split-symbol", split_entry, "--split-allow-spills"]
                cmd += ["--", form]
                r = subprocess.run(cmd, capture_output=True, text=True)
                checked += 1
                image = open(out, "rb").read() if r.returncode == 0 and os.path.isfile(out) else b""
                ok = bool(image) and all(m in image for m in MARKS[form])
                what = "prints the timeline line" if form == PRINTF else "holds the block records"
                print(("ok   " if ok else "FAIL ") + f"{name} ({arch}) builds with {form} and {what}")
                if not ok:
                    failures += 1
                    print(r.stdout[-2000:] + r.stderr[-2000:])
                elif form == RECORDS:
                    shutil.copy(out, os.path.join(records_dir, f"{name}.{arch}.cubin"))
                    shutil.copy(out + ".resources", os.path.join(records_dir, f"{name}.{arch}.resources"))
        print(f"{checked} built, {failures} failed")
        if len(argv) == 9:
            if "sm_90a" not in archs:
                print("skip the end-to-end part: its cases run the sm_90a kernels")
            else:
                failures += end_to_end(tmp, records_dir, bundle, *argv[5:9])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
