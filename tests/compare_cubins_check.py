#!/usr/bin/env python3
"""Checks tools/build/compare_cubins.py on the built bundle: a bundle matches itself; a copy
with one flipped bit in a kernel's code, or in a debug section only, or with a cubin missing,
is reported as it should be (different / same / missing); bad arguments and a file that is not
ELF64 are errors (exit 2) that name what is wrong.
usage: compare_cubins_check.py COMPARE_CUBINS_PY BUNDLE_DIR
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile


def flip_in_section(tool, path, wanted):
    """Flips one bit inside the first section whose name satisfies `wanted`; returns its name."""
    blob = bytearray(open(path, "rb").read())
    for name, (kind, _, size, data) in tool.sections(path).items():
        # The section's bytes must occur once in the file, so their position is its offset.
        if wanted(name) and size > 0 and kind != tool.SECTION_TYPE_NOBITS and blob.count(data) == 1:
            blob[blob.index(data) + size // 2] ^= 1
            open(path, "wb").write(blob)
            return name
    raise SystemExit(f"no section to flip in {path}")


def run(script, before, after):
    return subprocess.run([sys.executable, script, before, after], capture_output=True, text=True)


def main():
    script, bundle = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("compare_cubins", script)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    cubins = sorted(f for f in os.listdir(bundle) if f.endswith(".cubin"))
    target = next(f for f in cubins if f.startswith("mma_bf16_d512"))
    checks = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "bundle")
        shutil.copytree(bundle, copy)
        checks.append(("a bundle matches itself", run(script, bundle, copy).returncode == 0))
        flip_in_section(tool, os.path.join(copy, target), lambda n: "debug" in n)
        checks.append(("a debug-section change is ignored", run(script, bundle, copy).returncode == 0))
        section = flip_in_section(tool, os.path.join(copy, target), lambda n: n.startswith(".text"))
        result = run(script, bundle, copy)
        checks.append((f"a flipped bit in {section} is found",
                       result.returncode == 1 and f"DIFF {target}" in result.stdout))
        os.remove(os.path.join(copy, cubins[0]))
        result = run(script, bundle, copy)
        checks.append(("a missing cubin is reported", result.returncode == 1 and f"MISSING {cubins[0]}" in result.stdout))
        result = run(script, bundle, os.path.join(tmp, "none"))
        checks.append(("a missing directory is a usage error naming it",
                       result.returncode == 2 and "is not a directory" in result.stderr))
        with open(os.path.join(copy, target), "wb") as f:
            f.write(b"not an ELF file")
        result = run(script, bundle, copy)
        checks.append(("a file that is not ELF64 is an error naming it",
                       result.returncode == 2 and "not an ELF64 file" in result.stderr and target in result.stderr))
    no_arguments = subprocess.run([sys.executable, script], capture_output=True, text=True)
    checks.append(("no arguments is a usage error that prints the usage",
                   no_arguments.returncode == 2 and "BEFORE_DIR AFTER_DIR" in no_arguments.stdout))
    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'} {name}")
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
