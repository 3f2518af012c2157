#!/usr/bin/env python3
"""ab_summary.py - the table of an A/B benchmark: `wideattn bench --json` files of several
bundles (or builds) taken in alternating rounds, one TFLOP/s column per label with every round's
figure, and the change of each label's median against the first label's.

usage: ab_summary.py LABEL=FILE[,FILE...] [LABEL=FILE[,FILE...] ...] [--kernel NAME | --by-case]

Each LABEL names one bundle; its FILEs are its rounds in order. Rows are (case, kernel) pairs
in the order the first label's first file lists them; --kernel keeps one kernel's rows;
--by-case pairs rows by case alone (runs where each bundle timed its own choice of kernel, one
row a case: the kernel column names every kernel that ran it). Exit 0, or 2 with a message
naming the argument or file that is wrong.
"""
import json
import statistics
import sys


class UsageError(Exception):
    pass


def parse_args(argv):
    groups, kernel, by_case = [], None, False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--by-case":
            by_case = True
            i += 1
            continue
        if arg == "--kernel":
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise UsageError("option --kernel needs a value")
            kernel = argv[i + 1]
            i += 2
            continue
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        label, sep, files = arg.partition("=")
        if not sep or not label or not files:
            raise UsageError(f"argument '{arg}' is not LABEL=FILE[,FILE...]")
        if any(label == seen for seen, _ in groups):
            raise UsageError(f"label '{label}' given twice")
        groups.append((label, [f for f in files.split(",") if f]))
        i += 1
    if not groups:
        raise UsageError("no LABEL=FILE arguments (see --help)")
    if by_case and kernel is not None:
        raise UsageError("--kernel and --by-case exclude each other")
    return groups, kernel, by_case


def load_round(path, by_case=False):
    """{(case, kernel): tflops} of one bench JSON file, and the row order; by_case: keyed
    (case, None), with {case: kernel} as a third value."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read bench JSON '{path}': {e}")
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list):
        raise UsageError(f"'{path}' has no 'cases' list (not a `wideattn bench --json` file)")
    figures, order, kernels = {}, [], {}
    for c in cases:
        try:
            key = (c["case"], None if by_case else c["kernel"])
            if key in figures:
                raise UsageError(f"'{path}': case {c['case']} twice (--by-case takes one kernel a case)")
            figures[key] = float(c["tflops"])
            kernels[c["case"]] = str(c["kernel"])
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"'{path}': a case without case/kernel/tflops")
        order.append(key)
    return figures, order, kernels


def summarize(groups, kernel=None, by_case=False):
    """Markdown table lines."""
    rounds = {label: [load_round(p, by_case) for p in files] for label, files in groups}
    order = rounds[groups[0][0]][0][1]
    if kernel is not None:
        order = [key for key in order if key[1] == kernel]
        if not order:
            raise UsageError(f"--kernel {kernel}: no such kernel in '{groups[0][1][0]}'")
    labels = [label for label, _ in groups]
    lines = ["| case | kernel | " + " | ".join(labels) + " | " +
             " | ".join(f"{label} vs {labels[0]}" for label in labels[1:]) + " |",
             "| --- | --- |" + " ---: |" * (2 * len(labels) - 1)]
    for key in order:
        cells, medians = [], []
        for label in labels:
            values = [figures[key] for figures, _, _ in rounds[label] if key in figures]
            cells.append(" / ".join(f"{v:.1f}" for v in values) if values else "-")
            medians.append(statistics.median(values) if values else None)
        changes = []
        for m in medians[1:]:
            base = medians[0]
            changes.append(f"{100.0 * (m / base - 1.0):+.1f}%" if m is not None and base else "-")
        name = key[1]
        if by_case:  # every kernel that ran the case, in label order
            names = []
            for label in labels:
                for _, _, kernels in rounds[label]:
                    if key[0] in kernels and kernels[key[0]] not in names:
                        names.append(kernels[key[0]])
            name = " / ".join(names)
        lines.append(f"| {key[0]} | {name} | " + " | ".join(cells) + " | " + " | ".join(changes) + " |")
    return lines


def main(argv):
    try:
        groups, kernel, by_case = parse_args(argv)
        print("\n".join(summarize(groups, kernel, by_case)))
    except UsageError as e:
        print(f"ab_summary: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
