"""main_job_check.py - tools/main_job.sh's own options, none of which runs tools/setup.sh: --help
(usage naming --no-setup, exit 0), and --no-setup refused with a message (exit 2) on a build
directory that is not configured and with setup options after it. Every case points
$WIDEATTN_BUILD_DIR at an empty directory, so nothing is built or installed.

usage: python3 main_job_check.py PATH/tools/main_job.sh
"""
import os
import subprocess
import sys
import tempfile

from check_lines import expect, failures

EXIT_OK = 0
EXIT_USAGE = 2
MAIN_JOB = sys.argv[1]


def run(args, build_dir):
    env = dict(os.environ, WIDEATTN_BUILD_DIR=build_dir)
    proc = subprocess.run(["bash", MAIN_JOB] + args, capture_output=True, text=True, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


with tempfile.TemporaryDirectory() as empty_build:
    # (label, args, exit status, stream, fragments that must all stand in it)
    cases = [
        ("main_job.sh --help", ["--help"], EXIT_OK, "out",
         ["usage: tools/main_job.sh [--no-setup | SETUP_OPTIONS...]", "--no-setup   skip tools/setup.sh"]),
        ("main_job.sh -h", ["-h"], EXIT_OK, "out", ["usage: tools/main_job.sh"]),
        ("main_job.sh --no-setup without a configured build", ["--no-setup"], EXIT_USAGE, "err",
         [f"main job: --no-setup needs a configured build in '{empty_build}'", "run tools/setup.sh"]),
        ("main_job.sh --no-setup with setup options", ["--no-setup", "-Dgpu_archs=sm_90a"], EXIT_USAGE, "err",
         ["main job: --no-setup takes no setup options (got '-Dgpu_archs=sm_90a')"]),
    ]
    for label, args, want_rc, stream, fragments in cases:
        rc, out, err = run(args, empty_build)
        text = out if stream == "out" else err
        expect(label, rc == want_rc and all(f in text for f in fragments), (rc, out[-300:], err[-300:]))
    expect("main_job.sh options leave the build directory empty", os.listdir(empty_build) == [],
           os.listdir(empty_build))

print(f"main_job: {len(failures)} failed")
sys.exit(1 if failures else 0)
