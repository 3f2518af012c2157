#!/usr/bin/env python3
"""Checks tools/gpu/variant_bundle.py against the built bundle: its checksum is the loader's (a
cubin put back unchanged keeps the checksum manifest_gen wrote), a replaced cubin gets its own
size and checksum and, from a resources file beside it, its ptxas figures, every other entry and
file stays the base's, and bad arguments are refused with exit 2 naming what is wrong, nothing written.
usage: variant_bundle_check.py VARIANT_BUNDLE_PY BUNDLE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    tool, bundle = sys.argv[1], sys.argv[2]
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    def run(*args):
        return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)

    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    # The two smallest cubins keep the pure-Python checksum quick.
    entries = sorted({k["cubin"]: k for k in manifest["kernels"]}.values(), key=lambda k: k["cubin_bytes"])[:2]
    if len(entries) < 2:
        print("variant_bundle_check: the built bundle has fewer than two cubins")
        return 1
    first, second = entries

    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        os.makedirs(base)
        shutil.copyfile(os.path.join(bundle, "manifest.json"), os.path.join(base, "manifest.json"))
        for k in entries:
            shutil.copyfile(os.path.join(bundle, k["cubin"]), os.path.join(base, k["cubin"]))

        # Unchanged bytes: the checksum manifest_gen computed in C++.
        same_dir = os.path.join(tmp, "same_src")
        os.makedirs(same_dir)
        same = os.path.join(same_dir, first["cubin"])
        shutil.copyfile(os.path.join(bundle, first["cubin"]), same)
        r = run("--base", base, "--out", os.path.join(tmp, "same"), same)
        expect(r.returncode == 0, f"unchanged cubin: exit {r.returncode}: {r.stderr}")
        with open(os.path.join(tmp, "same", "manifest.json")) as f:
            out = json.load(f)
        expect(out == manifest, "unchanged cubin: the manifest differs from the base's")

        # A replaced cubin (the other cubin's bytes under the first's name) with a resources file.
        variant_dir = os.path.join(tmp, "variant_src")
        os.makedirs(variant_dir)
        variant = os.path.join(variant_dir, first["cubin"])
        shutil.copyfile(os.path.join(bundle, second["cubin"]), variant)
        with open(variant[: -len(".cubin")] + ".resources", "w") as f:
            f.write("registers=77\nspill_stores=8\nspill_loads=4\nstack=16\nshared=0\n"
                    "split_registers=78\nsplit_spill_stores=0\nsplit_spill_loads=0\nsplit_stack=0\nsplit_shared=0\n")
        out_dir = os.path.join(tmp, "variant")
        r = run("--base", base, "--out", out_dir, variant)
        expect(r.returncode == 0, f"variant: exit {r.returncode}: {r.stderr}")
        expect(first["cubin"] in r.stdout and "ptxas from" in r.stdout, f"variant: report {r.stdout!r}")
        with open(os.path.join(out_dir, "manifest.json")) as f:
            out = json.load(f)
        with open(variant, "rb") as f:
            variant_bytes = f.read()
        with open(os.path.join(out_dir, first["cubin"]), "rb") as f:
            expect(f.read() == variant_bytes, "variant: the cubin in the bundle is not the variant's")
        with open(os.path.join(out_dir, second["cubin"]), "rb") as f, \
                open(os.path.join(bundle, second["cubin"]), "rb") as g:
            expect(f.read() == g.read(), "variant: the other cubin was not copied unchanged")
        for before, after in zip(manifest["kernels"], out["kernels"]):
            if before["cubin"] != first["cubin"]:
                expect(after == before, f"variant: entry {before['name']} ({before['arch']}) changed")
                continue
            expect(after["cubin_bytes"] == len(variant_bytes), "variant: cubin_bytes")
            expect(after["cubin_fnv1a64"] == second["cubin_fnv1a64"],
                   "variant: checksum of the second cubin's bytes is not the one manifest_gen wrote for them")
            expect(after["ptxas"] == {"registers": 77, "spill_stores": 8, "spill_loads": 4, "stack": 16},
                   f"variant: ptxas {after['ptxas']}")
            if "split_ptxas" in before:
                expect(after["split_ptxas"]["registers"] == 78, f"variant: split_ptxas {after['split_ptxas']}")
            rest = {k: v for k, v in after.items() if k not in ("cubin_bytes", "cubin_fnv1a64", "ptxas", "split_ptxas")}
            expect(rest == {k: v for k, v in before.items() if k in rest}, "variant: other fields changed")

        # --priority alone: every entry of that kernel name gets the priority, nothing else changes.
        free = max(k["priority"] for k in manifest["kernels"]) + 1
        prio_dir = os.path.join(tmp, "prio")
        r = run("--base", base, "--out", prio_dir, "--priority", f"{first['name']}={free}")
        expect(r.returncode == 0, f"--priority: exit {r.returncode}: {r.stderr}")
        with open(os.path.join(prio_dir, "manifest.json")) as f:
            out = json.load(f)
        for before, after in zip(manifest["kernels"], out["kernels"]):
            changed = dict(before, priority=free) if before["name"] == first["name"] else before
            expect(after == changed, f"--priority: entry {before['name']} ({before['arch']}) is {after}")
        taken = next((k for k in manifest["kernels"] if k["name"] != first["name"] and k["arch"] == first["arch"]), None)

        # Refusals, each naming what is wrong.
        stray = os.path.join(variant_dir, "not_in_bundle.sm_90a.cubin")
        shutil.copyfile(variant, stray)
        absent = os.path.join(tmp, "absent", first["cubin"])
        twin_dir = os.path.join(tmp, "twin")
        os.makedirs(twin_dir)
        twin = os.path.join(twin_dir, first["cubin"])
        shutil.copyfile(variant, twin)
        for args, needle in (
            (["--base", base, "--out", os.path.join(tmp, "w"), absent], f"{absent}: not a readable file"),
            (["--base", base, "--out", os.path.join(tmp, "v"), variant, twin], "two variant cubins share a file name"),
            (["--base", base, "--out", os.path.join(tmp, "x"), stray], "no cubin named not_in_bundle.sm_90a.cubin"),
            (["--base", base, "--out", base, variant], "is the base bundle itself"),
            (["--base", os.path.join(tmp, "none"), "--out", os.path.join(tmp, "y"), variant], "cannot read its manifest.json"),
            (["--base", base, "--out", os.path.join(tmp, "z"), os.path.join(variant_dir, first["cubin"] + "x")],
             "no cubin named"),
            (["--base", base, "--out", os.path.join(tmp, "p1"), "--priority", "no_such_kernel=5"],
             "no kernel named no_such_kernel"),
            (["--base", base, "--out", os.path.join(tmp, "p2"), "--priority", f"{first['name']}=high"],
             "give NAME=P with P an integer in 0..1048576"),
            (["--base", base, "--out", os.path.join(tmp, "p3"), "--priority", f"{first['name']}=2000000"],
             "give NAME=P"),
            (["--base", base, "--out", os.path.join(tmp, "p4")], "nothing to change"),
        ) + ((
            (["--base", base, "--out", os.path.join(tmp, "p5"), "--priority", f"{first['name']}={taken['priority']}"],
             f"{taken['name']} already has priority {taken['priority']}"),
        ) if taken else ()):
            r = run(*args)
            expect(r.returncode == 2, f"{args}: exit {r.returncode}")
            expect(needle in r.stderr, f"{args}: message {r.stderr!r} lacks {needle!r}")
            out_arg = args[args.index("--out") + 1]
            expect(out_arg == base or not os.path.exists(out_arg), f"{args}: refused, yet {out_arg} was written")

    for failure in failures:
        print("FAIL", failure)
    print("variant_bundle_check:", "ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
