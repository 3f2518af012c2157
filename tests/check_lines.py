"""check_lines.py - the "ok LABEL" / "FAIL LABEL DETAIL" lines of the script tests (cli_smoke.py,
docs_check.py): expect() prints one per check and keeps the failed labels in `failures`."""

failures = []


def expect(label, condition, detail=""):
    if condition:
        print(f"ok   {label}")
    else:
        print(f"FAIL {label} {detail}")
        failures.append(label)
