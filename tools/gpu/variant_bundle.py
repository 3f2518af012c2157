#!/usr/bin/env python3
"""variant_bundle.py - a kernel bundle that differs from another in a few cubins: the base bundle's
files copied to OUT_DIR, each given cubin put in place of the base's cubin of the same file name,
and OUT_DIR/manifest.json written with that cubin's size and FNV-1a 64 checksum (the loader
refuses a cubin whose size or checksum is not the manifest's), and with its ptxas figures where a
resources file (NAME.resources beside NAME.cubin, as tools/build/compile_cubin.py writes it) is
found. For A/B runs of kernel variants (tools/gpu/ab_bench.sh LABEL=OUT_DIR ...): only the changed
cubins need to travel to the GPU machine, the variant bundle is made there from the base.

A variant must keep everything else the manifest says of its kernel (symbols, dtypes, tile,
threads, dynamic shared memory, features): those come from the kernel table at build time and
are not read from the cubin. Build the variant's cubin from a tree that changes the kernel's code
only (e.g. `tools/build/compile_cubin.py ... --out X.sm_90a.cubin --resources X.sm_90a.resources`).

A variant may also give a kernel another priority (--priority NAME=P, every cubin of that name):
how a candidate entry that selection does not take by default (a lower priority than the kernel
it would replace) is made the one selection takes, without a rebuild.

usage: variant_bundle.py --base BASE_DIR --out OUT_DIR [--priority NAME=P ...] [CUBIN ...]
  --base BASE_DIR     the bundle to start from (cubins + manifest.json)
  --out OUT_DIR       where the variant bundle is written (created; must not be BASE_DIR)
  --priority NAME=P   kernel NAME of the base manifest gets priority P (an integer in
                      0..1048576, the manifest's range), on every arch it has a cubin for; refused
                      when another kernel has P on one of those archs
  CUBIN               a variant cubin; its file name must be a cubin of the base manifest
At least one CUBIN or --priority.
Exit status: 0 written, 2 bad arguments or input (the message names the argument).
"""
import argparse
import json
import os
import shutil
import sys

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1
PTXAS_FIELDS = ("registers", "spill_stores", "spill_loads", "stack")


def fnv1a64(data):
    """The loader's checksum (dispatch/bundle_files.cpp): FNV-1a over the bytes, 64 bits."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return "%016x" % h


def read_resources(path):
    """NAME=VALUE lines of a compile_cubin.py resources file as a dict of ints."""
    values = {}
    with open(path) as f:
        for line in f:
            name, sep, value = line.strip().partition("=")
            if sep:
                values[name] = int(value)
    return values


class Refused(Exception):
    pass


PRIORITY_MAX = 1048576  # dispatch/manifest.cpp kManifestPriorityMax


def parse_priority(text):
    """(name, priority) of a --priority NAME=P value; Refused naming the value when malformed."""
    name, sep, value = text.partition("=")
    try:
        priority = int(value)
    except ValueError:
        priority = None
    if not sep or not name or priority is None or not 0 <= priority <= PRIORITY_MAX:
        raise Refused(f"--priority {text!r}: give NAME=P with P an integer in 0..{PRIORITY_MAX}")
    return name, priority


def set_priorities(manifest, priorities, manifest_path, log):
    """Gives each (name, priority) of `priorities` to every manifest entry of that kernel name."""
    kernels = manifest.get("kernels", [])
    for name, priority in priorities:
        entries = [k for k in kernels if k.get("name") == name]
        if not entries:
            raise Refused(f"--priority {name}={priority}: no kernel named {name} in {manifest_path}")
        archs = {k.get("arch") for k in entries}
        taken = sorted(k["name"] for k in kernels
                       if k.get("name") != name and k.get("arch") in archs and k.get("priority") == priority)
        if taken:
            raise Refused(f"--priority {name}={priority}: {', '.join(taken)} already has priority {priority}")
        for k in entries:
            k["priority"] = priority
        log(f"{name}: priority {priority} ({', '.join(sorted(a for a in archs if a))})")


def make_variant(base, out, cubins, log=print, priorities=()):
    manifest_path = os.path.join(base, "manifest.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"--base {base}: cannot read its manifest.json ({e})")
    if os.path.realpath(base) == os.path.realpath(out):
        raise Refused(f"--out {out} is the base bundle itself")
    by_cubin = {}
    for kernel in manifest.get("kernels", []):
        by_cubin.setdefault(kernel["cubin"], []).append(kernel)
    for cubin in cubins:
        name = os.path.basename(cubin)
        if name not in by_cubin:
            raise Refused(f"{cubin}: no cubin named {name} in {manifest_path}")
        if not os.path.isfile(cubin):
            raise Refused(f"{cubin}: not a readable file")
    names = [os.path.basename(c) for c in cubins]
    if len(set(names)) != len(names):
        raise Refused("two variant cubins share a file name: " + ", ".join(sorted(names)))
    if not cubins and not priorities:
        raise Refused("nothing to change: give at least one CUBIN or --priority")
    set_priorities(manifest, priorities, manifest_path, log)

    os.makedirs(out, exist_ok=True)
    for entry in os.listdir(base):
        source = os.path.join(base, entry)
        if os.path.isfile(source) and entry != "manifest.json":
            shutil.copyfile(source, os.path.join(out, entry))
    for cubin in cubins:
        name = os.path.basename(cubin)
        with open(cubin, "rb") as f:
            data = f.read()
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        resources_path = cubin[: -len(".cubin")] + ".resources" if cubin.endswith(".cubin") else None
        resources = read_resources(resources_path) if resources_path and os.path.isfile(resources_path) else None
        for kernel in by_cubin[name]:
            kernel["cubin_bytes"] = len(data)
            kernel["cubin_fnv1a64"] = fnv1a64(data)
            if resources:
                kernel["ptxas"] = {field: resources.get(field, 0) for field in PTXAS_FIELDS}
                if "split_ptxas" in kernel:
                    kernel["split_ptxas"] = {field: resources.get("split_" + field, 0) for field in PTXAS_FIELDS}
            log(f"{name}: {len(data)} bytes, checksum {kernel['cubin_fnv1a64']}"
                + (f", ptxas from {os.path.basename(resources_path)}" if resources else ", ptxas figures the base's"))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def main(argv):
    parser = argparse.ArgumentParser(description="A kernel bundle with some cubins replaced (see the module text).")
    parser.add_argument("--base", required=True, help="the bundle to start from")
    parser.add_argument("--out", required=True, help="where the variant bundle is written")
    parser.add_argument("--priority", action="append", default=[], metavar="NAME=P",
                        help="give kernel NAME priority P (repeatable)")
    parser.add_argument("cubins", nargs="*", metavar="CUBIN", help="variant cubins, named as the base's")
    args = parser.parse_args(argv)
    try:
        priorities = [parse_priority(text) for text in args.priority]
        make_variant(args.base, args.out, args.cubins, priorities=priorities)
    except Refused as e:
        print(f"variant_bundle: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
