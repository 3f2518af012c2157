#!/usr/bin/env python3
"""candidates_check.py - the `candidates` test: every candidate kernel this bundle leaves out
(bundle/meson.build, the candidate_kernels option) was compiled by tools/build/compile_cubin.py,
which fails the build on spills (but where the candidate table allows them), on more than 255
registers and on serialised wgmma; here each cubin must be an ELF image, its resources must name a
register count for every entry, and it must not spill where the table does not allow it.

  candidates_check.py [--what=TEXT] [--spills-allowed=NAME | --split-spills-allowed=NAME]... [CUBIN RESOURCES]...

CUBIN RESOURCES: the outputs of the candidate targets, in pairs (NAME.ARCH.candidate.cubin);
--spills-allowed=NAME accepts spills in any entry of kernel NAME, --split-spills-allowed=NAME in its
split-KV entry (the table's spills_allowed_sm / split_spills_allowed_sm for the cubin's arch);
--what=TEXT names the cubins in the summary line (default "candidate cubins"; the
`split_ranges_other` test checks the bundle's split-KV kernels under the other split_ranges form).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "gpu"))
from variant_bundle import read_resources  # noqa: E402  (the resources reader of the variant bundles)

ELF_MAGIC = b"\x7fELF"


def spill_bytes(numbers, name, allowed, split_allowed):
    """The spill bytes of a candidate's resources that its table entry does not allow."""
    if name in allowed:
        return 0
    return sum(v for k, v in numbers.items() if "spill" in k and not (name in split_allowed and k.startswith("split_")))


def main(args):
    allowed, split_allowed, what = set(), set(), "candidate cubins"
    while args and args[0].startswith("--"):
        option, _, name = args[0].partition("=")
        if option == "--what" and name:
            what = name
        elif option == "--spills-allowed" and name:
            allowed.add(name)
        elif option == "--split-spills-allowed" and name:
            split_allowed.add(name)
        else:
            print(f"candidates_check: unknown option {args[0]!r} (--what=TEXT, --spills-allowed=NAME, --split-spills-allowed=NAME)")
            return 2
        args = args[1:]
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
        spills = spill_bytes(numbers, os.path.basename(cubin).split(".")[0], allowed, split_allowed)
        print(f"{'ok' if ok and not spills else 'FAIL'} {cubin}: "
              + ", ".join(f"{k}={numbers[k]}" for k in entries) + f", spill bytes not allowed {spills}")
        failed += 0 if ok and not spills else 1
    print(f"{len(args) // 2} {what}, {failed} failed" if args else f"no {what} in this build")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
