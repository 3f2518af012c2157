#!/usr/bin/env python3
"""peer_predecessors.py - how an implementation's time in a peer-harness run depends on what ran
right before it: the median of its per-repetition times (`ms_all` in the JSON of
tools/bench/peer_bench.py) grouped by the implementation launched right before each of them
(`ran_after`, recorded by the harness; for reports older than that field, reconstructed from
peer_bench.balanced_order over the timed implementations in report order, with `(start)` for
the first place of a repetition).

usage: peer_predecessors.py PEERS_JSON [--impl NAME]   (default NAME: wideattn)

Prints one Markdown row per case. Exit 0, or 2 with a message naming the file or argument.
"""
import collections
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_bench import balanced_order  # noqa: E402  (plain Python: torch loads only on the GPU path)


def by_predecessor(case, impl):
    """{predecessor: [ms, ...]} for impl in one case of a peer report, or None without ms_all."""
    impls = case.get("impls", {})
    timed = [name for name, entry in impls.items() if entry.get("status") == "ok" and "ms_all" in entry]
    if impl not in timed:
        return None
    groups = collections.defaultdict(list)
    recorded = impls[impl].get("ran_after")
    if recorded is not None and len(recorded) == len(impls[impl]["ms_all"]):
        for before, ms in zip(recorded, impls[impl]["ms_all"]):
            groups[before or "(none)"].append(ms)
        return groups
    for rep, ms in enumerate(impls[impl]["ms_all"]):
        order = balanced_order(timed, rep)
        place = order.index(impl)
        groups[order[place - 1] if place > 0 else "(start)"].append(ms)
    return groups


def main(argv):
    args, impl = [], "wideattn"
    i = 0
    while i < len(argv):
        if argv[i] == "--impl":
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                print("peer_predecessors: option --impl needs a value", file=sys.stderr)
                return 2
            impl = argv[i + 1]
            i += 2
            continue
        if argv[i] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        args.append(argv[i])
        i += 1
    if len(args) != 1:
        print("peer_predecessors: give one peers JSON file (see --help)", file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            report = json.load(f)
        cases = report["cases"]
    except OSError as exc:
        print(f"peer_predecessors: {args[0]}: cannot read ({exc.strerror})", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError) as exc:
        print(f"peer_predecessors: {args[0]}: not a peer report ({exc})", file=sys.stderr)
        return 2
    rows = []
    columns = []
    for case in cases:
        groups = by_predecessor(case, impl)
        if groups is None:
            continue
        rows.append((case.get("name", "?"), groups))
        columns += [name for name in groups if name not in columns]
    if not rows:
        print(f"peer_predecessors: {args[0]}: no case has per-repetition times (ms_all) of '{impl}'",
              file=sys.stderr)
        return 2
    print(f"median ms of {impl} by the implementation that ran right before it (repetitions)")
    print("| case | " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    for name, groups in rows:
        cells = [f"{statistics.median(groups[c]):.3f} ({len(groups[c])})" if c in groups else "-" for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
