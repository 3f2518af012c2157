#!/usr/bin/env python3
"""Checks that the block-timeline diagnostic still builds in both its forms
(kernels/common/block_timeline.cuh): the kernels that carry the hook compiled by
tools/build/compile_cubin.py with -DWIDEATTN_BLOCK_TIMELINE (their cubins hold the line format that
tools/bench/block_timeline.py reads) and with -DWIDEATTN_BLOCK_TIMELINE_RECORDS (their cubins hold
the records and count symbols that `wideattn bench --block-timeline` reads back; compile_cubin
refuses a build whose wgmma ptxas serialized, so a hooked wgmma kernel stays unserialized), as the
README tells; and no cubin of the built bundle holds either (the diagnostic never ships). Kernels
whose arch is not configured are skipped.

usage: block_timeline_build_check.py COMPILE_CUBIN NVCC SOURCE_ROOT ARCH[,ARCH...] BUNDLE_DIR
"""
import os
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


def main(argv):
    if len(argv) != 5:
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
        for name, source, entry, split_entry, min_sm, only, forms in HOOKED:
            usable = [a for a in archs if arch_number(a) >= min_sm and (only is None or a in only)]
            if not usable:
                print(f"skip {name}: none of {archs} builds it")
                continue
            arch = usable[0]
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
    print(f"{checked} built, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
