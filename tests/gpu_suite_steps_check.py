"""gpu_suite_steps_check.py - the gpu-tests steps of tools/gpu/gpu_suite.sh run every test case of
the GPU test binary exactly once, on the CPU: each step's doctest filter (gpu_suite.sh
--list-test-steps) goes to `wideattn_gpu_tests --list-test-cases` (doctest's own matching; the
listing needs no GPU); every TEST_CASE of tests/gpu/test_gpu*.cpp (the binary's sources) must be in
the binary and in exactly one step, and every pattern a step names must select a test case (a
renamed case would otherwise leave a stale pattern behind). The steps pass --duration=true.
Also its racecheck steps (gpu_suite.sh --list-racecheck-steps, one kernel instrumented per step):
one per kernel of the build's bundle manifest, each regex matching exactly that kernel's entry
points (unsplit and split) and no other kernel's (but the cluster kernels' where the step runs
every kernel's checks: its filter is empty), and the selftest filter of each step the kernel's
own name for a prefill kernel (its cases alone), none for the others. And its --sanitizer-part option: 1, 2 and 3 accepted,
anything else refused with exit 2 and its message; parts 1 and 3 run the racecheck steps between
them, each once (stand-ins for the CLI and compute-sanitizer). And a failed test step (stand-ins for the CLI and
the test binary, which prints a doctest failure report and exits 1): the suite exits 1 and its
console output shows the failed assertion with its test case, not only the log's tail.

usage: python3 gpu_suite_steps_check.py PATH/tools/gpu/gpu_suite.sh PATH/wideattn_gpu_tests PATH/tests/gpu
       PATH/build/bundle/manifest.json
"""
import json
import glob
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

from check_lines import expect, failures

SUITE, BINARY, SOURCE_DIR, MANIFEST = sys.argv[1:5]
SOURCE_GLOB = "test_gpu*.cpp"
STEP_NAME = re.compile(r"gpu-tests-(\d+)$")
FILTER_OPTIONS = ("--test-case=", "--test-case-exclude=")
DURATION = "--duration=true"
LISTING_RULE = "=" * 79  # doctest frames the listed names with this rule


def listed_cases(args):
    """Test case names `wideattn_gpu_tests --list-test-cases ARGS` prints."""
    proc = subprocess.run([BINARY, "--list-test-cases"] + args, capture_output=True, text=True, timeout=60)
    lines = proc.stdout.splitlines()
    rules = [i for i, line in enumerate(lines) if line == LISTING_RULE]
    if proc.returncode != 0 or len(rules) != 2:
        raise RuntimeError(f"{BINARY} --list-test-cases {args}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return lines[rules[0] + 1:rules[1]]


def source_cases():
    """TEST_CASE names of the GPU binary's sources, by file."""
    names = {}
    for path in sorted(glob.glob(os.path.join(SOURCE_DIR, SOURCE_GLOB))):
        text = open(path, encoding="utf-8").read()
        for name in re.findall(r'^TEST_CASE\("((?:[^"\\]|\\.)*)"\)', text, re.M):
            names[name] = os.path.basename(path)
    return names


def patterns(filter_arg):
    """The comma-separated patterns of a doctest filter (a backslash escapes a comma)."""
    value = filter_arg.split("=", 1)[1]
    return [p.replace("\\,", ",") for p in re.split(r"(?<!\\),", value) if p]


proc = subprocess.run(["bash", SUITE, "--list-test-steps"], capture_output=True, text=True, timeout=60)
expect("gpu_suite.sh --list-test-steps exits 0", proc.returncode == 0, proc.stderr[-300:])
# One line per step: its name, then each doctest argument, tab-separated (patterns hold spaces).
steps = [(fields[0], fields[1:]) for fields in (line.split("\t") for line in proc.stdout.splitlines())]
numbers = [int(m.group(1)) if (m := STEP_NAME.match(name)) else 0 for name, _ in steps]
expect("the steps are gpu-tests-1, gpu-tests-2, ... in order, more than one",
       len(steps) > 1 and numbers == list(range(1, len(steps) + 1)), [name for name, _ in steps])
for name, args in steps:
    filters = [a for a in args if a.startswith(FILTER_OPTIONS)]
    expect(f"{name}: one doctest filter, times printed ({DURATION})",
           len(filters) == 1 and DURATION in args and len(args) == 2, args)

everything = listed_cases([])
sources = source_cases()
expect("the binary lists test cases", len(everything) > 0, everything)
expect(f"every TEST_CASE of tests/gpu/{SOURCE_GLOB} is in the binary, and no other",
       sorted(sources) == sorted(everything),
       {"not in the binary": sorted(set(sources) - set(everything)),
        "not in the sources": sorted(set(everything) - set(sources))})

runs = Counter()
for name, args in steps:
    selected = listed_cases([a for a in args if a != DURATION])
    expect(f"{name} selects test cases", len(selected) > 0, args)
    runs.update(selected)
    filter_arg = next((a for a in args if a.startswith(FILTER_OPTIONS)), "")
    if filter_arg.startswith("--test-case="):
        for pattern in patterns(filter_arg):
            expect(f"{name}: '{pattern}' selects a test case", len(listed_cases([f"--test-case={pattern}"])) > 0)
never = sorted(n for n in everything if runs[n] == 0)
twice = sorted(n for n in everything if runs[n] > 1)
expect("every test case runs in a step", not never, never)
expect("no test case runs in two steps", not twice, twice)

# The racecheck steps, for the build tree whose manifest is MANIFEST (build/bundle/manifest.json).
env = dict(os.environ, WIDEATTN_BUILD_DIR=os.path.dirname(os.path.dirname(os.path.abspath(MANIFEST))))
proc = subprocess.run(["bash", SUITE, "--list-racecheck-steps"], capture_output=True, text=True, timeout=60, env=env)
expect("gpu_suite.sh --list-racecheck-steps exits 0", proc.returncode == 0, proc.stderr[-300:])
race_steps = [line.split("\t") for line in proc.stdout.splitlines()]
kernels = json.load(open(MANIFEST))["kernels"]
entries = {}
for k in kernels:
    entries.setdefault(k["name"], set()).update(e for e in (k["symbol"], k.get("split_symbol", "")) if e)
expect("one racecheck step per kernel of the manifest",
       sorted(fields[0] for fields in race_steps) == sorted(entries), [fields[0] for fields in race_steps])
every_entry = set().union(*entries.values()) if entries else set()
# The cluster kernels' entry points: the steps that run every kernel's checks instrument them too
# (racecheck faults in an uninstrumented cluster kernel's st.async).
cluster_entries = set().union(*(entries[k["name"]] for k in kernels if "cta_pair" in k.get("features", [])))
kinds = {k["name"]: k["kind"] for k in kernels}
for fields in race_steps:
    if len(fields) != 3 or fields[0] not in entries:
        expect(f"racecheck step line {fields}: a kernel of the manifest, a regex and a filter", False)
        continue
    name, alternation, selftest_filter = fields
    expect(f"racecheck-{name}: the selftest filter is {'its name' if kinds[name] == 'prefill' else 'empty'}",
           selftest_filter == (name if kinds[name] == "prefill" else ""), selftest_filter)
    # compute-sanitizer's --kernel-name regex=... searches the kernel's name; the step anchors it.
    regex = re.compile(f"^({alternation})$")
    matched = {e for e in every_entry if regex.search(e)}
    wanted = entries[name] if kinds[name] == "prefill" else entries[name] | cluster_entries
    expect(f"racecheck-{name}: its regex matches its entry points"
           f"{'' if kinds[name] == 'prefill' else ' and the cluster kernels'} and no other kernel's",
           matched == wanted, {"matched": sorted(matched), "wanted": sorted(wanted)})

# --sanitizer-part takes 1, 2 or 3 (a third of the compute-sanitizer steps each, a device call each);
# anything else is refused before any step runs.
for value in ("1", "2", "3"):
    proc = subprocess.run(["bash", SUITE, "--sanitizer-part", value, "--list-test-steps"], capture_output=True,
                          text=True, timeout=60)
    expect(f"gpu_suite.sh --sanitizer-part {value} is accepted", proc.returncode == 0, proc.stderr[-300:])
for args, shown in ((["4"], "4"), (["x"], "x"), ([], "")):
    proc = subprocess.run(["bash", SUITE, "--sanitizer-part"] + args, capture_output=True, text=True, timeout=60)
    message = f"gpu_suite: --sanitizer-part '{shown}' is not 1, 2 or 3"
    expect(f"gpu_suite.sh --sanitizer-part {args} is refused with exit 2 and '{message}'",
           proc.returncode == 2 and proc.stderr.strip() == message, {"rc": proc.returncode, "stderr": proc.stderr})

# The three parts share the sanitizer steps out: run with stand-ins (a CLI and a compute-sanitizer
# that only exit 0) over this build's manifest, part 1 runs memcheck and the first half (rounded up)
# of the racecheck steps in --list-racecheck-steps order, part 3 the rest, part 2 synccheck and the
# split-KV and metadata cases and no per-kernel racecheck step; together every racecheck step once.
SANITIZER_STEP = re.compile(r"^== (\S+)$", re.M)
with tempfile.TemporaryDirectory() as tmp:
    build, fake_bin = os.path.join(tmp, "build"), os.path.join(tmp, "bin")
    for sub in ("tools", "tests", "bundle"):
        os.makedirs(os.path.join(build, sub))
    os.makedirs(fake_bin)
    with open(MANIFEST) as src, open(os.path.join(build, "bundle", "manifest.json"), "w") as dst:
        dst.write(src.read())
    for path in (os.path.join(build, "tools", "wideattn"), os.path.join(build, "tests", "wideattn_gpu_tests"),
                 os.path.join(fake_bin, "compute-sanitizer")):
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, 0o755)
    env = dict(os.environ, WIDEATTN_BUILD_DIR=build, WIDEATTN_COMMIT="test",
               PATH=fake_bin + os.pathsep + os.environ.get("PATH", ""))
    listing = subprocess.run(["bash", SUITE, "--list-racecheck-steps"], capture_output=True, text=True, timeout=60,
                             env=env)
    race_all = ["racecheck-" + line.split("\t")[0] for line in listing.stdout.splitlines() if line]
    ran = {}
    for part in ("1", "2", "3"):
        proc = subprocess.run(["bash", SUITE, "--only-sanitizer", "--sanitizer-part", part], capture_output=True,
                              text=True, timeout=120, env=dict(env, OUT=os.path.join(tmp, "out" + part)))
        ran[part] = SANITIZER_STEP.findall(proc.stdout)
        expect(f"gpu_suite.sh --only-sanitizer --sanitizer-part {part} with stand-ins exits 0", proc.returncode == 0,
               {"rc": proc.returncode, "stderr": proc.stderr[-300:]})
    half = (len(race_all) + 1) // 2
    per_kernel = {part: [n for n in ran[part] if n in race_all] for part in ran}
    expect("the bundle has racecheck steps to share out", len(race_all) >= 2, race_all)
    expect("part 1: memcheck, then the first half of the racecheck steps in order",
           "memcheck" in ran["1"] and per_kernel["1"] == race_all[:half], {"ran": ran["1"], "half": race_all[:half]})
    expect("part 3: the other half of the racecheck steps in order, no memcheck",
           "memcheck" not in ran["3"] and per_kernel["3"] == race_all[half:], {"ran": ran["3"]})
    expect("part 2: synccheck and the split-KV and metadata cases, no per-kernel racecheck step",
           per_kernel["2"] == [] and {"synccheck", "memcheck-split", "racecheck-split", "synccheck-split",
                                      "memcheck-meta", "synccheck-meta"} <= set(ran["2"]), {"ran": ran["2"]})

# A failed test step prints doctest's failed assertions (with their test case) on the console, not
# only the log's tail: a run with stand-ins for the CLI and the GPU test binary, the second printing
# a doctest failure report followed by more lines than the tail shows, then exiting 1.
STAND_IN_FAILURE = """===============================================================================
../tests/gpu/test_gpu_plan.cpp:65:
TEST CASE:  gpu plans: a stand-in test case

../tests/gpu/test_gpu_plan.cpp:80: ERROR: CHECK( same_bits ) is NOT correct!
  values: CHECK( false )
  logged: kernel := stand_in_kernel
"""
with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "build")
    for sub in ("tools", "tests", "bundle"):
        os.makedirs(os.path.join(build, sub))
    scripts = {
        os.path.join(build, "tools", "wideattn"): "#!/bin/sh\nexit 0\n",
        os.path.join(build, "tests", "wideattn_gpu_tests"):
            "#!/bin/sh\ncat <<'END'\n" + STAND_IN_FAILURE + "END\n"
            "i=0; while [ $i -lt 40 ]; do echo \"0.5 s: a passing case $i\"; i=$((i + 1)); done\nexit 1\n",
    }
    for path, text in scripts.items():
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    env = dict(os.environ, OUT=os.path.join(tmp, "out"), WIDEATTN_BUILD_DIR=build, WIDEATTN_COMMIT="test")
    proc = subprocess.run(["bash", SUITE, "--only-tests", "--test-steps", "1"], capture_output=True, text=True,
                          timeout=120, env=env)
    expect("gpu_suite.sh with a failing test step exits 1", proc.returncode == 1, {"rc": proc.returncode,
                                                                                  "stderr": proc.stderr[-300:]})
    shown = proc.stdout
    expect("its console output names the failed assertion, its test case and its captured values",
           "-- failed assertions in gpu_tests_1.txt:" in shown
           and "TEST CASE:  gpu plans: a stand-in test case" in shown
           and "test_gpu_plan.cpp:80: ERROR: CHECK( same_bits ) is NOT correct!" in shown
           and "logged: kernel := stand_in_kernel" in shown, shown[-2000:])

print(f"gpu_suite_steps: {len(failures)} failed")
sys.exit(1 if failures else 0)
