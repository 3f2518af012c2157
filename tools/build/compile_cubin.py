#!/usr/bin/env python3
"""Compile one kernel source to a cubin for one arch and check ptxas' resource report.

Used by bundle/meson.build (one custom_target per kernel and arch). Writes:
  OUT.cubin            the cubin
  OUT.resources        key=value lines: registers, spill_stores, spill_loads, stack, shared, and
                       with --split-symbol the same of the split-KV entry as split_registers,
                       split_spill_stores, split_spill_loads, split_stack
  OUT.d                make-style dependency file (for ninja)
Fails (exit 1) when ptxas reports more registers than --max-registers or any spill bytes
(unless --allow-spills; --split-allow-spills for the split-KV entry), so a kernel that would spill on a shipped arch never builds; and when
ptxas says it serialized wgmma instructions (a silent slowdown of the Hopper-tier kernels).
"""
import argparse
import re
import subprocess
import sys

MAX_REGISTERS_PER_THREAD = 255
WGMMA_SERIALIZED = "wgmma.mma_async instructions are serialized"


def gencode(arch):
    m = re.fullmatch(r"sm_(\d+)(a?)", arch)
    if not m:
        raise SystemExit(f"compile_cubin: --arch={arch!r} is not of the form sm_NN or sm_NNa")
    number, suffix = m.group(1), m.group(2)
    return f"arch=compute_{number}{suffix},code=sm_{number}{suffix}"


def parse_ptxas(text, symbol):
    """Returns the resource numbers ptxas printed for entry `symbol`."""
    resources = {"registers": -1, "spill_stores": 0, "spill_loads": 0, "stack": 0, "shared": 0}
    in_entry = False
    for line in text.splitlines():
        if "Compiling entry function" in line or "Function properties for" in line:
            in_entry = f"'{symbol}'" in line or line.rstrip().endswith(symbol)
            continue
        if not in_entry:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            resources["stack"] = int(m.group(1))
            resources["spill_stores"] = int(m.group(2))
            resources["spill_loads"] = int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            resources["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            resources["shared"] = int(m.group(1))
    return resources


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc", required=True, help="path of nvcc")
    ap.add_argument("--arch", required=True, help="target, e.g. sm_90a")
    ap.add_argument("--symbol", required=True, help="kernel entry point whose resources are checked")
    ap.add_argument("--src", required=True, help="kernel .cu file")
    ap.add_argument("--out", required=True, help="output cubin path")
    ap.add_argument("--resources", required=True, help="output key=value resource file")
    ap.add_argument("--depfile", required=True, help="output dependency file")
    ap.add_argument("--include", action="append", default=[], help="include directory (repeatable)")
    ap.add_argument("--max-registers", type=int, default=MAX_REGISTERS_PER_THREAD)
    ap.add_argument("--allow-spills", action="store_true", help="do not fail on spill bytes")
    ap.add_argument("extra", nargs="*", help="extra nvcc flags (after --)")
    ap.add_argument("--split-symbol", default="", help="the kernel's split-KV entry point, checked the same way")
    ap.add_argument("--split-allow-spills", action="store_true", help="accept spills in the split-KV entry")
    args = ap.parse_args()

    cmd = [args.nvcc, "-cubin", "-gencode", gencode(args.arch), "-O3", "-std=c++17", "-lineinfo",
           "-Xptxas", "-v", "-MD", "-MF", args.depfile, "-o", args.out]
    cmd += [f"-I{d}" for d in args.include]
    cmd += args.extra + [args.src]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        sys.stderr.write(f"compile_cubin: nvcc failed for {args.src} ({args.arch})\n")
        return 1
    with open(args.out + ".ptxas.txt", "w") as f:
        f.write(proc.stdout)
    res = parse_ptxas(proc.stdout, args.symbol)
    if res["registers"] < 0:
        sys.stderr.write(proc.stdout)
        sys.stderr.write(f"compile_cubin: ptxas printed no resource line for symbol {args.symbol}\n")
        return 1
    entries = [(args.symbol, res, args.allow_spills, "")]
    if args.split_symbol:
        split = parse_ptxas(proc.stdout, args.split_symbol)
        if split["registers"] < 0:
            sys.stderr.write(proc.stdout)
            sys.stderr.write(f"compile_cubin: ptxas printed no resource line for symbol {args.split_symbol}\n")
            return 1
        entries.append((args.split_symbol, split, args.split_allow_spills, "split_"))
    with open(args.resources, "w") as f:
        for _, numbers, _, prefix in entries:
            for key, value in numbers.items():
                f.write(f"{prefix}{key}={value}\n")
    problems = []
    for symbol, numbers, spills_allowed, _ in entries:
        if numbers["registers"] > args.max_registers:
            problems.append(f"{symbol}: {numbers['registers']} registers > {args.max_registers}")
        if numbers["spill_stores"] + numbers["spill_loads"] and not spills_allowed:
            problems.append(f"{symbol}: {numbers['spill_stores']} bytes spill stores, "
                            f"{numbers['spill_loads']} bytes spill loads")
    if WGMMA_SERIALIZED in proc.stdout:
        problems.append("ptxas serialized wgmma instructions")
    if problems:
        sys.stderr.write(proc.stdout)
        sys.stderr.write(f"compile_cubin: {args.arch}: " + "; ".join(problems) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
