#!/usr/bin/env python3
"""check_tuning.py - checks the tuning bar: after `wideattn tune`, every case runs the kernel the
tuning file names for its shape class and dtypes, and that kernel is the fastest of the
candidates within a tolerance (default 2%) in a fresh side-by-side run.

usage: check_tuning.py --tuning FILE --selected BENCH.json [BENCH.json ...]
                       --side-by-side BENCH.json [BENCH.json ...] [--tolerance 0.02]
                       [--require-choice] [--json OUT] [--markdown OUT]
       check_tuning.py --tuning FILE --list-candidates

--tuning        the tuning file `wideattn tune` wrote (docs/design.md, "Tuning file")
--selected      `wideattn bench --json` reports of runs with that tuning file in force (the
                dispatcher chose: no --kernel, no --kernels); each case's "kernel" must be the
                file's choice for the case's shape class and (q_dtype, kv_dtype)
--side-by-side  `wideattn bench --kernels A,B,... --json` reports: per (case, q_dtype, kv_dtype)
                the candidates' median_ms; the chosen kernel's must be at most (1 + tolerance)
                times the fastest candidate's, and the chosen kernel and every kernel the tuning
                file timed for that class and dtypes must have been measured
--tolerance     the allowed excess over the fastest candidate, a fraction (default 0.02)
--require-choice  a case whose class and dtypes have no choice in the file fails (default: it
                is reported as "no choice" and does not fail)
--json, --markdown  also write the rows and the summary there
--list-candidates  print the kernels the tuning file timed (every choice's timings), comma
                separated, for `wideattn bench --kernels`, and exit (one list for every class:
                bench runs a single_token kernel only on cases of decode_single, a few_tokens
                kernel only on those of decode_single and decode)

Shape classes as the library derives them (dispatch/tuning.h), in this order: decode_single
when total_q <= num_seqs, decode when total_q <= 8 * num_seqs, prefill_short when total_q < 8192,
prefill_long otherwise; total_q = sum(q_lens), num_seqs = len(q_lens). `wideattn tune` times a
single_token kernel (the decode kernels) on decode_single cases only and a few_tokens kernel (the
verify kernels) on decode_single and decode cases only, and `wideattn bench --kernels` skips them
on the others, so the candidates of every class are measured on its cases.

Exit status: 0 every case passes (or has no choice), 1 a case fails, 2 bad input (a missing or
unreadable file, malformed JSON, a missing or wrong field: the message names the file and field).
"""
import argparse
import json
import math
import sys

DECODE_TOKENS_PER_SEQ = 8      # kernels/common/kernel_desc.h kFewTokensPerSeq
SHORT_PREFILL_TOKENS = 8192    # dispatch/tuning.h kShortPrefillTokens
SHAPE_CLASSES = ("decode_single", "decode", "prefill_short", "prefill_long")  # dispatch/tuning.h
TUNING_FORMAT = 1
DTYPE_NAMES = ("bf16", "f16", "f32", "f64", "e4m3")
CHECKSUM_DIGITS = 16
CC_MAX = 100
INT32_MAX = 2**31 - 1
MAX_MILLISECONDS = 1e9
BENCH_TOOL = "wideattn bench"
DEFAULT_TOLERANCE = 0.02
RATIO_SLACK = 1e-12            # relative: a ratio of exactly 1 + tolerance passes despite rounding
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2
PASS, FAIL, NO_CHOICE = "pass", "FAIL", "no choice"


class BadInput(Exception):
    pass


def shape_class(q_lens):
    """The library's shape class of a batch with these new-token counts."""
    total_q, num_seqs = sum(q_lens), len(q_lens)
    if total_q <= num_seqs:
        return "decode_single"
    if total_q <= DECODE_TOKENS_PER_SEQ * num_seqs:
        return "decode"
    return "prefill_short" if total_q < SHORT_PREFILL_TOKENS else "prefill_long"


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def load_json(path, role):
    try:
        with open(path) as f:
            return json.load(f, parse_constant=reject_constant)
    except OSError as e:
        raise BadInput(f"{role}: cannot read '{path}': {e.strerror or e}")
    except ValueError as e:
        raise BadInput(f"{role}: '{path}' is not valid JSON: {e}")


class Fields:
    """Readers that name the file and the field on a failure."""

    def __init__(self, path):
        self.path = path

    def fail(self, field, expected):
        raise BadInput(f"{self.path}: field '{field}' must be {expected}")

    def get(self, obj, key, field, kind, expected):
        value = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            self.fail(field, expected)
        return value

    def string(self, obj, key, field, choices=None):
        value = self.get(obj, key, field, str, "a string")
        if choices is not None and value not in choices:
            self.fail(field, "one of " + ", ".join(choices) + f" (it is '{value}')")
        if choices is None and not value:
            self.fail(field, "a non-empty string")
        return value

    def integer(self, obj, key, field, lo, hi):
        value = obj.get(key) if isinstance(obj, dict) else None
        if type(value) is not int or not lo <= value <= hi:
            self.fail(field, f"an integer in {lo}..{hi}")
        return value

    def milliseconds(self, obj, key, field, positive=False):
        value = obj.get(key) if isinstance(obj, dict) else None
        ok = type(value) in (int, float) and math.isfinite(value) and value <= MAX_MILLISECONDS
        if not ok or value < 0 or (positive and value == 0):
            self.fail(field, "a number of milliseconds " + ("> 0" if positive else ">= 0"))
        return float(value)

    def array(self, obj, key, field):
        return self.get(obj, key, field, list, "an array")


def read_timings(fields, choice, at):
    kernels = []
    for t, timing in enumerate(fields.array(choice, "timings", at + ".timings")):
        tat = f"{at}.timings[{t}]"
        if not isinstance(timing, dict):
            fields.fail(tat, "an object")
        kernels.append(fields.string(timing, "kernel", tat + ".kernel"))
        fields.milliseconds(timing, "total_ms", tat + ".total_ms")
        for k, case in enumerate(fields.array(timing, "cases", tat + ".cases")):
            if not isinstance(case, dict):
                fields.fail(f"{tat}.cases[{k}]", "an object")
            fields.string(case, "case", f"{tat}.cases[{k}].case")
            fields.milliseconds(case, "median_ms", f"{tat}.cases[{k}].median_ms")
    return kernels


def read_tuning_header(fields, doc):
    if not isinstance(doc, dict):
        fields.fail("(top level)", "an object")
    if type(doc.get("format")) is not int or doc["format"] != TUNING_FORMAT:
        fields.fail("format", str(TUNING_FORMAT))
    device = fields.get(doc, "device", "device", dict, "an object")
    name = fields.string(device, "name", "device.name")
    fields.integer(device, "cc_major", "device.cc_major", 1, CC_MAX)
    fields.integer(device, "cc_minor", "device.cc_minor", 0, CC_MAX)
    fields.integer(device, "driver_version", "device.driver_version", 0, INT32_MAX)
    checksum = fields.get(doc, "bundle_checksum", "bundle_checksum", str, "a string")
    if len(checksum) != CHECKSUM_DIGITS or any(c not in "0123456789abcdef" for c in checksum):
        fields.fail("bundle_checksum", f"{CHECKSUM_DIGITS} lower-case hex digits")
    return name


def read_tuning(path):
    """(device name, {(class, q_dtype, kv_dtype): (kernel, [kernels timed])}) of a tuning file,
    checked as the library checks it (dispatch/tuning.cpp)."""
    fields = Fields(path)
    doc = load_json(path, "--tuning")
    device = read_tuning_header(fields, doc)
    choices = {}
    for i, choice in enumerate(fields.array(doc, "choices", "choices")):
        at = f"choices[{i}]"
        if not isinstance(choice, dict):
            fields.fail(at, "an object")
        key = (fields.string(choice, "class", at + ".class", SHAPE_CLASSES),
               fields.string(choice, "q_dtype", at + ".q_dtype", DTYPE_NAMES),
               fields.string(choice, "kv_dtype", at + ".kv_dtype", DTYPE_NAMES))
        kernel = fields.string(choice, "kernel", at + ".kernel")
        timed = read_timings(fields, choice, at)
        if key in choices:
            fields.fail(at, f"the only choice for {key[0]} {key[1]}/{key[2]} (it appears twice)")
        choices[key] = (kernel, timed)
    return device, choices


def read_bench(path, role):
    """(gpu or None, [case records]) of a `wideattn bench --json` report."""
    fields = Fields(path)
    doc = load_json(path, role)
    if not isinstance(doc, dict):
        fields.fail("(top level)", "an object")
    if doc.get("tool") != BENCH_TOOL:
        fields.fail("tool", f"'{BENCH_TOOL}' (a `wideattn bench --json` report)")
    records = []
    for i, case in enumerate(fields.array(doc, "cases", "cases")):
        at = f"cases[{i}]"
        if not isinstance(case, dict):
            fields.fail(at, "an object")
        q_lens = case.get("q_lens")
        if not isinstance(q_lens, list) or not q_lens or any(type(n) is not int or n < 0 for n in q_lens):
            fields.fail(at + ".q_lens", "a non-empty array of integers >= 0")
        records.append({
            "file": path, "field": at, "case": fields.string(case, "case", at + ".case"),
            "kernel": fields.string(case, "kernel", at + ".kernel"), "q_lens": q_lens,
            "contexts": case.get("contexts"),
            "q_dtype": fields.string(case, "q_dtype", at + ".q_dtype", DTYPE_NAMES),
            "kv_dtype": fields.string(case, "kv_dtype", at + ".kv_dtype", DTYPE_NAMES),
            "median_ms": fields.milliseconds(case, "median_ms", at + ".median_ms", positive=True)})
    gpu = doc.get("gpu")
    return (gpu if isinstance(gpu, str) and gpu else None), records


def where(record):
    return f"{record['file']} {record['field']}"


def same_shape(a, b):
    """Raises BadInput when two records of one case name describe different batches."""
    for key in ("q_lens", "contexts"):
        if a[key] is not None and b[key] is not None and a[key] != b[key]:
            raise BadInput(f"case '{a['case']}' has {key} {a[key]} in {where(a)} but {b[key]} in {where(b)}")


def index_selected(paths):
    """[(record, class)] of the --selected reports, one per (case, q_dtype, kv_dtype)."""
    seen, rows, gpus = {}, [], set()
    for path in paths:
        gpu, records = read_bench(path, "--selected")
        if gpu:
            gpus.add(gpu)
        for r in records:
            key = (r["case"], r["q_dtype"], r["kv_dtype"])
            if key in seen:
                hint = " (a --kernels run? pass it to --side-by-side)" if seen[key]["file"] == path else ""
                raise BadInput(f"--selected: case '{key[0]}' {key[1]}/{key[2]} appears in {where(seen[key])} "
                               f"and in {where(r)}{hint}")
            seen[key] = r
            rows.append(r)
    if not rows:
        raise BadInput("--selected: the reports " + ", ".join(paths) + " have no cases")
    return rows, gpus


def index_side_by_side(paths):
    """{(case, q_dtype, kv_dtype): {kernel: record}} of the --side-by-side reports."""
    measured, gpus = {}, set()
    for path in paths:
        gpu, records = read_bench(path, "--side-by-side")
        if gpu:
            gpus.add(gpu)
        for r in records:
            by_kernel = measured.setdefault((r["case"], r["q_dtype"], r["kv_dtype"]), {})
            if r["kernel"] in by_kernel:
                raise BadInput(f"--side-by-side: {r['kernel']} on case '{r['case']}' {r['q_dtype']}/{r['kv_dtype']} "
                               f"appears in {where(by_kernel[r['kernel']])} and in {where(r)}")
            by_kernel[r["kernel"]] = r
    return measured, gpus


def fastest_of(by_kernel):
    """(kernel, median_ms) of the fastest measured candidate, or (None, None)."""
    if not by_kernel:
        return None, None
    kernel = min(by_kernel, key=lambda k: (by_kernel[k]["median_ms"], k))
    return kernel, by_kernel[kernel]["median_ms"]


def side_by_side_reasons(tuned, timed, by_kernel, tolerance, row):
    """Why the tuned kernel fails the side-by-side comparison (empty: it passes); fills row's times."""
    reasons = []
    missing = [k for k in dict.fromkeys([tuned] + timed) if k not in by_kernel]
    if tuned in missing:
        reasons.append(f"{tuned} not measured side by side")
    others = [k for k in missing if k != tuned]
    if others:
        reasons.append("candidates not measured side by side: " + ", ".join(others))
    if tuned not in by_kernel:
        return reasons
    row["tuned_ms"] = by_kernel[tuned]["median_ms"]
    row["ratio"] = row["tuned_ms"] / row["fastest_ms"]
    if row["tuned_ms"] > row["fastest_ms"] * (1 + tolerance) * (1 + RATIO_SLACK):
        reasons.append(f"{tuned} is {row['ratio']:.4f}x {row['fastest']} (over 1 + {tolerance:g})")
    return reasons


def check_case(record, choices, measured, tolerance, require_choice):
    """The row of one selected case: its class, the tuned and the fastest kernel, the verdict."""
    cls = shape_class(record["q_lens"])
    key = (record["case"], record["q_dtype"], record["kv_dtype"])
    by_kernel = measured.get(key, {})
    for other in by_kernel.values():
        same_shape(record, other)
    fastest, fastest_ms = fastest_of(by_kernel)
    row = {"case": record["case"], "class": cls, "q_dtype": record["q_dtype"], "kv_dtype": record["kv_dtype"],
           "tuned": None, "selected": record["kernel"], "tuned_ms": None, "fastest": fastest,
           "fastest_ms": fastest_ms, "ratio": None, "reasons": []}
    choice = choices.get((cls, record["q_dtype"], record["kv_dtype"]))
    if choice is None:
        if require_choice:
            row["reasons"].append(f"the tuning file has no choice for {cls} {key[1]}/{key[2]}")
        row["verdict"] = FAIL if require_choice else NO_CHOICE
        return row
    tuned, timed = choice
    row["tuned"] = tuned
    if record["kernel"] != tuned:
        side = by_kernel.get(record["kernel"])
        ms = f" ({side['median_ms']:.3f} ms side by side)" if side else ""
        row["reasons"].append(f"selected {record['kernel']}{ms}, the tuning file names {tuned}")
    row["reasons"] += side_by_side_reasons(tuned, timed, by_kernel, tolerance, row)
    row["verdict"] = FAIL if row["reasons"] else PASS
    return row


def cell(value, digits=3):
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


COLUMNS = ("case", "class", "q/kv", "tuned", "selected", "tuned_ms", "fastest", "fastest_ms", "ratio", "verdict")


def row_cells(row):
    return [row["case"], row["class"], f"{row['q_dtype']}/{row['kv_dtype']}", cell(row["tuned"]),
            row["selected"], cell(row["tuned_ms"]), cell(row["fastest"]), cell(row["fastest_ms"]),
            cell(row["ratio"], 4), row["verdict"]]


def summary_line(rows):
    counts = {v: sum(r["verdict"] == v for r in rows) for v in (PASS, FAIL, NO_CHOICE)}
    return f"{len(rows)} cases: {counts[PASS]} pass, {counts[FAIL]} fail, {counts[NO_CHOICE]} no choice"


def table_lines(rows):
    cells = [list(COLUMNS)] + [row_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = []
    for row, text in zip([None] + rows, cells):
        line = "  ".join(t.ljust(w) for t, w in zip(text, widths)).rstrip()
        if row and row["reasons"]:
            line += "  (" + "; ".join(row["reasons"]) + ")"
        lines.append(line)
    return lines


def markdown_lines(rows, tolerance, tuning_path):
    lines = [f"Tuning bar (`{tuning_path}`, tolerance {tolerance:g}; ratio = tuned_ms / fastest_ms in the "
             "side-by-side run): " + summary_line(rows), "",
             "| " + " | ".join(COLUMNS) + " | reasons |", "|" + " --- |" * (len(COLUMNS) + 1)]
    for r in rows:
        lines.append("| " + " | ".join(row_cells(r)) + " | " + "; ".join(r["reasons"]) + " |")
    return lines


def write_text(path, text, option):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise BadInput(f"{option}: cannot write '{path}': {e.strerror or e}")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="check_tuning.py", usage=argparse.SUPPRESS, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tuning", required=True)
    parser.add_argument("--selected", nargs="+", default=[])
    parser.add_argument("--side-by-side", nargs="+", default=[], dest="side_by_side")
    parser.add_argument("--tolerance", default=str(DEFAULT_TOLERANCE))
    parser.add_argument("--require-choice", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--list-candidates", action="store_true")
    args = parser.parse_args(argv)
    try:
        tolerance = float(args.tolerance)
    except ValueError:
        tolerance = math.nan
    if not math.isfinite(tolerance) or tolerance < 0:
        raise BadInput(f"--tolerance='{args.tolerance}' is not a finite fraction >= 0 (e.g. 0.02 for 2%)")
    args.tolerance = tolerance
    if not args.list_candidates:
        for option, value in (("--selected", args.selected), ("--side-by-side", args.side_by_side)):
            if not value:
                raise BadInput(f"{option} needs at least one `wideattn bench --json` report")
    return args


def candidates(choices):
    """Every kernel the tuning file timed or chose, in the order of first appearance."""
    names = []
    for kernel, timed in choices.values():
        names += [kernel] + timed
    return list(dict.fromkeys(names))


def device_notes(device, gpus, option):
    return [f"note: the tuning file was written on '{device}', the {option} reports ran on '{gpu}'"
            for gpu in sorted(gpus) if gpu != device]


def report(args, device, rows, notes):
    """Prints the table and writes --json / --markdown."""
    for note in notes:
        print(note)
    print(f"tuning bar: {args.tuning}, tolerance {args.tolerance:g} (ratio = tuned_ms / fastest_ms, side by side)")
    print("\n".join(table_lines(rows)))
    print(summary_line(rows))
    if args.json:
        doc = {"tool": "check_tuning.py", "tuning": args.tuning, "device": device, "tolerance": args.tolerance,
               "selected": args.selected, "side_by_side": args.side_by_side, "notes": notes, "rows": rows,
               "summary": summary_line(rows)}
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "--json")
    if args.markdown:
        write_text(args.markdown, "\n".join(markdown_lines(rows, args.tolerance, args.tuning)) + "\n", "--markdown")


def main(argv):
    try:
        args = parse_args(argv)
        device, choices = read_tuning(args.tuning)
        if args.list_candidates:
            names = candidates(choices)
            if not names:
                raise BadInput(f"--tuning: '{args.tuning}' has no choices")
            print(",".join(names))
            return EXIT_PASS
        selected, selected_gpus = index_selected(args.selected)
        measured, measured_gpus = index_side_by_side(args.side_by_side)
        rows = [check_case(r, choices, measured, args.tolerance, args.require_choice) for r in selected]
        notes = device_notes(device, selected_gpus, "--selected") + device_notes(device, measured_gpus, "--side-by-side")
        report(args, device, rows, notes)
    except BadInput as e:
        print(f"check_tuning.py: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAIL if any(r["verdict"] == FAIL for r in rows) else EXIT_PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
