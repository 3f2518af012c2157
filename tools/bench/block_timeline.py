#!/usr/bin/env python3
"""block_timeline.py - when the blocks of each kernel launch ran: the summary of the lines a kernel
built with -DWIDEATTN_BLOCK_TIMELINE prints (kernels/common/block_timeline.cuh), one per block:

    wideattn-timeline NAME BLOCK_X BLOCK_Y BLOCK_Z SMID START_NS END_NS

usage: block_timeline.py FILE [--json OUT] [--launches N]

FILE ('-': standard input) may hold any other output too; only those lines are read. Lines of
one kernel name belong to one launch until a block index repeats, which starts the next launch
of that name. Launches are listed by their first block's start; every time is in microseconds
from the first block of the first launch in FILE (%globaltimer is common to all SMs). Per launch:
the blocks and SMs, the first and last block start (the ramp), the block times (min / median /
max), the first, median and last block end and the tail (last end - median end), and the gap
from the previous launch's last end to this one's first start (negative: they overlapped).
--launches N prints the first N launches (default all); --json OUT also writes them as JSON
('-': standard output, the table then going to standard error). Exit 0, or 2 with a message
naming the line or argument that is wrong.
"""
import json
import statistics
import sys

PREFIX = "wideattn-timeline"
FIELDS = 8  # the prefix, the name and six numbers


class UsageError(Exception):
    pass


def parse_args(argv):
    path, json_out, launches = None, None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--json", "--launches"):
            if i + 1 >= len(argv):
                raise UsageError(f"option {arg} needs a value")
            value = argv[i + 1]
            if arg == "--json":
                json_out = value
            else:
                try:
                    launches = int(value)
                except ValueError:
                    raise UsageError(f"--launches='{value}' is not an integer") from None
                if launches < 1:
                    raise UsageError(f"--launches={launches} must be at least 1")
            i += 2
            continue
        if arg.startswith("--"):
            raise UsageError(f"unknown option '{arg}'")
        if path is not None:
            raise UsageError(f"one FILE only (got '{path}' and '{arg}')")
        path = arg
        i += 1
    if path is None:
        raise UsageError("missing FILE (see --help)")
    return path, json_out, launches


def read_blocks(lines, source):
    """The timeline records of `lines` in order: dicts of name, block, sm, start, end (ns)."""
    blocks = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text.startswith(PREFIX + " "):
            continue
        parts = text.split()
        if len(parts) != FIELDS:
            raise UsageError(f"{source}:{number}: {len(parts)} fields, a timeline line has {FIELDS}: '{text}'")
        try:
            x, y, z, sm, start, end = (int(v) for v in parts[2:])
        except ValueError:
            raise UsageError(f"{source}:{number}: a field is not an integer: '{text}'") from None
        if end < start:
            raise UsageError(f"{source}:{number}: the block ends ({end}) before it starts ({start})")
        blocks.append({"name": parts[1], "block": (x, y, z), "sm": sm, "start": start, "end": end})
    if not blocks:
        raise UsageError(f"{source}: no '{PREFIX}' lines (was the kernel built with -DWIDEATTN_BLOCK_TIMELINE?)")
    return blocks


def split_launches(blocks):
    """Blocks grouped into launches: per name, a repeated block index starts a new launch."""
    open_launch = {}  # name -> (launch, seen block indices)
    launches = []
    for b in blocks:
        current = open_launch.get(b["name"])
        if current is None or b["block"] in current[1]:
            current = ({"name": b["name"], "blocks": []}, set())
            open_launch[b["name"]] = current
            launches.append(current[0])
        current[0]["blocks"].append(b)
        current[1].add(b["block"])
    return launches


def summarise(launches):
    """Per launch the figures of the module docstring, in us from the first block of all."""
    launches = sorted(launches, key=lambda launch: min(b["start"] for b in launch["blocks"]))
    origin = min(b["start"] for b in launches[0]["blocks"])
    us = lambda ns: (ns - origin) / 1000.0  # noqa: E731 (a unit conversion)
    rows, previous_end = [], None
    for launch in launches:
        starts = [b["start"] for b in launch["blocks"]]
        ends = [b["end"] for b in launch["blocks"]]
        times = [(b["end"] - b["start"]) / 1000.0 for b in launch["blocks"]]
        row = {
            "name": launch["name"],
            "blocks": len(launch["blocks"]),
            "sms": len({b["sm"] for b in launch["blocks"]}),
            "first_start_us": us(min(starts)),
            "last_start_us": us(max(starts)),
            "block_us_min": min(times),
            "block_us_median": statistics.median(times),
            "block_us_max": max(times),
            "first_end_us": us(min(ends)),
            "median_end_us": us(statistics.median(ends)),
            "last_end_us": us(max(ends)),
        }
        row["tail_us"] = row["last_end_us"] - row["median_end_us"]
        row["gap_us"] = None if previous_end is None else row["first_start_us"] - previous_end
        previous_end = row["last_end_us"]
        rows.append(row)
    return rows


def table(rows):
    head = ("launch", "blocks", "SMs", "start first..last", "block us min / med / max", "end first / med / last",
            "tail", "gap")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        gap = "-" if row["gap_us"] is None else f"{row['gap_us']:.2f}"
        lines.append(
            f"| {row['name']} | {row['blocks']} | {row['sms']} | {row['first_start_us']:.2f} .. "
            f"{row['last_start_us']:.2f} | {row['block_us_min']:.2f} / {row['block_us_median']:.2f} / "
            f"{row['block_us_max']:.2f} | {row['first_end_us']:.2f} / {row['median_end_us']:.2f} / "
            f"{row['last_end_us']:.2f} | {row['tail_us']:.2f} | {gap} |")
    return "\n".join(lines)


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        path, json_out, count = parse_args(argv)
        if path == "-":
            lines, source = sys.stdin.read().splitlines(), "stdin"
        else:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError as e:
                raise UsageError(f"FILE {path}: {e.strerror}") from None
            source = path
        rows = summarise(split_launches(read_blocks(lines, source)))
        if count is not None:
            rows = rows[:count]
        print(table(rows), file=sys.stderr if json_out == "-" else sys.stdout)
        if json_out is not None:
            text = json.dumps({"tool": "block_timeline", "launches": rows}, indent=1)
            if json_out == "-":
                print(text)
            else:
                try:
                    with open(json_out, "w", encoding="utf-8") as f:
                        f.write(text + "\n")
                except OSError as e:
                    raise UsageError(f"--json {json_out}: {e.strerror}") from None
    except UsageError as e:
        print(f"block_timeline: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
