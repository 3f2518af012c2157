#!/usr/bin/env python3
"""count_results.py - reads meson's testlog.json and prints one plain closing line,
"N passed, N failed, N skipped", counting doctest test cases inside the doctest binaries
(from their "[doctest] test cases:" summary) and each other test as one. Exit 1 if any failed.
"""
import json
import re
import sys

DOCTEST_SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped")


def main():
    passed = failed = skipped = 0
    with open(sys.argv[1]) as log:
        for line in log:
            entry = json.loads(line)
            result = entry.get("result")
            summary = DOCTEST_SUMMARY.search(entry.get("stdout", "") or "")
            if result == "SKIP":
                skipped += 1
            elif summary:
                passed += int(summary.group(2))
                failed += int(summary.group(3))
                skipped += int(summary.group(4))
                if result != "OK" and int(summary.group(3)) == 0:
                    failed += 1  # crashed or timed out after its summary
            elif result == "OK":
                passed += 1
            else:
                failed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
