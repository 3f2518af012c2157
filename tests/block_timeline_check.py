#!/usr/bin/env python3
"""Checks tools/bench/block_timeline.py on synthetic timeline output: launches split where a block
index repeats, their order by start, the ramp, block times, tail and gaps (microseconds from the
first block), the JSON, and the usage errors (exit 2 with a message naming what is wrong)."""
import json
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = 0


def check(condition, what):
    global failures
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures += 1


def run(*args, stdin=None):
    r = subprocess.run([sys.executable, TOOL, *args], input=stdin, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def line(name, x, z, sm, start, end):
    return f"wideattn-timeline {name} {x} 0 {z} {sm} {start} {end}"


# Two rounds of a split kernel (4 blocks) each followed by its merge (2 blocks), among other output.
T0 = 5_000_000
rounds = []
for r in range(2):
    base = T0 + r * 200_000
    rounds += ["bench: some other line", line("split", 0, 0, 3, base, base + 70_000),
               line("split", 0, 1, 7, base + 1_000, base + 72_000), line("split", 0, 2, 9, base + 2_000, base + 73_000),
               line("split", 0, 3, 11, base + 2_000, base + 80_000),
               line("merge", 0, 0, 3, base + 79_000, base + 85_000), line("merge", 1, 0, 4, base + 79_500, base + 84_000)]
text = "\n".join(rounds) + "\n"
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "out.txt")
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run(path, "--json", os.path.join(tmp, "t.json"))
    check(rc == 0, f"a timeline file is summarised (rc {rc}, {err.strip()})")
    rows = json.load(open(os.path.join(tmp, "t.json")))["launches"]
    check([r["name"] for r in rows] == ["split", "merge", "split", "merge"], "four launches in start order")
    s, m = rows[0], rows[1]
    check(s["blocks"] == 4 and s["sms"] == 4 and m["blocks"] == 2, "blocks and SMs counted per launch")
    check(s["first_start_us"] == 0.0 and s["last_start_us"] == 2.0, "the ramp: first and last start")
    check((s["block_us_min"], s["block_us_max"]) == (70.0, 78.0), "block times min and max")
    check(s["block_us_median"] == 71.0, "block time median")
    check(s["last_end_us"] == 80.0 and s["median_end_us"] == 72.5, "last and median end")
    check(s["tail_us"] == 7.5, "the tail: last end - median end")
    check(s["gap_us"] is None and m["gap_us"] == -1.0, "the merge starts 1 us before the split's last end")
    check(rows[2]["first_start_us"] == 200.0 and rows[2]["gap_us"] == 115.0, "the second round from the same origin")
    check("| split | 4 | 4 | 0.00 .. 2.00 | 70.00 / 71.00 / 78.00 |" in out, "the table row of the first launch")
    rc, out, _ = run(path, "--launches", "2")
    check(rc == 0 and out.count("| split |") == 1 and out.count("| merge |") == 1, "--launches 2 prints two launches")
    rc, out, err = run("-", "--json", "-", stdin=text)
    check(rc == 0 and json.loads(out)["tool"] == "block_timeline" and "| merge |" in err,
          "standard input, the JSON on standard output and the table on standard error")
    bad = {
        "no lines": ("nothing here\n", "no 'wideattn-timeline' lines"),
        "field count": ("wideattn-timeline split 0 0 0 3 5\n", ":1: 7 fields, a timeline line has 8"),
        "not an integer": ("wideattn-timeline split 0 0 x 3 5 6\n", ":1: a field is not an integer"),
        "end before start": ("x\nwideattn-timeline split 0 0 0 3 9 6\n", ":2: the block ends (6) before it starts (9)"),
    }
    for what, (content, message) in bad.items():
        p = os.path.join(tmp, "bad.txt")
        with open(p, "w") as f:
            f.write(content)
        rc, _, err = run(p)
        check(rc == 2 and message in err, f"refused: {what} ({err.strip()})")
    for args, message in [((), "missing FILE"), ((path, "--launches", "0"), "--launches=0 must be at least 1"),
                          ((path, "--launches", "x"), "--launches='x' is not an integer"),
                          ((path, "--bogus"), "unknown option '--bogus'"), ((path, path), "one FILE only"),
                          ((os.path.join(tmp, "missing.txt"),), "missing.txt: No such file"),
                          ((path, "--json"), "option --json needs a value")]:
        rc, _, err = run(*args)
        check(rc == 2 and message in err, f"usage error: {' '.join(args) or '(none)'} ({err.strip()})")
    rc, out, _ = run("--help")
    check(rc == 0 and "usage: block_timeline.py" in out, "--help prints the usage")
print(f"{failures} failed")
sys.exit(1 if failures else 0)
