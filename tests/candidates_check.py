#!/usr/bin/env python3
"""candidates_check.py - the `candidates` test: every candidate kernel this bundle leaves out
(bundle/meson.build, the candidate_kernels option) was compiled by tools/build/compile_cubin.py,
which fails the build on spills, on more than 255 registers and on serialised wgmma; here each
cubin must be an ELF image and its resources must name a register count for every entry.

  candidates_check.py [CUBIN RESOURCES]...   (the outputs of the candidate targets, in pairs)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "gpu"))
from variant_bundle import read_resources  # noqa: E402  (the resources reader of the variant bundles)

ELF_MAGIC = b"\x7fELF"


def main(args):
    if len(args) % 2:
        print("candidates_check: expected CUBIN RESOURCES pairs")
        return 2
    failed = 0
    for cubin, res in zip(args[0::2], args[1::2]):
        with open(cubin, "rb") as f:
            elf = f.read(4) == ELF_MAGIC
        numbers = read_resources(res)
        entries = [k for k in ("registers", "split_registers") if k in numbers]
        ok = elf and entries and all(numbers[k] > 0 for k in entries)
        spills = sum(v for k, v in numbers.items() if "spill" in k)
        print(f"{'ok' if ok and not spills else 'FAIL'} {cubin}: "
              + ", ".join(f"{k}={numbers[k]}" for k in entries) + f", spill bytes {spills}")
        failed += 0 if ok and not spills else 1
    print(f"{len(args) // 2} candidate cubins, {failed} failed" if args else "no candidate left out of this bundle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
