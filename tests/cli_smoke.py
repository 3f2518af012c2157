"""cli_smoke.py - the `wideattn` CLI as a user runs it: help texts, inspect on the built
bundle, selftest without a GPU (error, and the skip flag), and bad arguments (exit 2 with a
message naming the argument).

usage: python3 cli_smoke.py PATH/wideattn
"""
import os
import subprocess
import sys

failures = []


def run(args, env_extra=None):
    env = dict(os.environ)
    env["WIDEATTN_LIBCUDA"] = "/nonexistent/libcuda.so.1"  # the no-GPU path, on any machine
    env.update(env_extra or {})
    proc = subprocess.run([CLI] + args, capture_output=True, text=True, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def expect(label, condition, detail=""):
    if condition:
        print(f"ok   {label}")
    else:
        print(f"FAIL {label} {detail}")
        failures.append(label)


CLI = sys.argv[1]

rc, out, err = run([])
expect("no command: usage, exit 2", rc == 2 and "usage: wideattn" in out, (rc, out))
rc, out, err = run(["--help"])
expect("--help lists commands", rc == 0 and all(c in out for c in ("inspect", "selftest", "accuracy")))
for command in ("inspect", "selftest"):
    rc, out, err = run([command, "--help"])
    expect(f"{command} --help", rc == 0 and f"usage: wideattn {command}" in out, (rc, out))
rc, out, err = run(["frobnicate"])
expect("unknown command", rc == 2 and "unknown command 'frobnicate'" in err, (rc, err))

rc, out, err = run(["inspect"])
expect("inspect lists the fp64 kernel", rc == 0 and "reference_f64" in out and "ptxas" in out, (rc, out, err))
archs = os.environ.get("WIDEATTN_TEST_ARCHS", "").split(",")
for arch in filter(None, archs):
    expect(f"inspect shows {arch}", f" {arch} " in out, out)
rc, out, err = run(["inspect", "--bundle", "/nonexistent"])
expect("inspect on a missing bundle", rc == 2 and "WIDEATTN_ERROR_BUNDLE" in err and "/nonexistent" in err, (rc, err))
rc, out, err = run(["inspect", "--device", "-1"])
expect("inspect --device -1", rc == 2 and "--device='-1'" in err, (rc, err))
rc, out, err = run(["inspect", "--colour"])
expect("inspect unknown option", rc == 2 and "unknown argument '--colour'" in err, (rc, err))

rc, out, err = run(["selftest"])
expect("selftest without a driver fails clearly", rc == 2 and "WIDEATTN_ERROR_NO_DRIVER" in err, (rc, err))
rc, out, err = run(["selftest", "--skip-without-gpu"])
expect("selftest --skip-without-gpu", rc == 0 and "skipped, no GPU" in out, (rc, out))
rc, out, err = run(["selftest", "--seed", "abc"])
expect("selftest bad seed", rc == 2 and "--seed='abc'" in err, (rc, err))

rc, out, err = run(["selftest", "--quick", "0"])
expect("selftest --quick 0", rc == 2 and "--quick='0'" in err, (rc, err))
rc, out, err = run(["bench", "--help"])
expect("bench --help", rc == 0 and "usage: wideattn bench" in out, (rc, out))
rc, out, err = run(["bench", "--cases", "prompt_99k"])
expect("bench unknown case", rc == 2 and "unknown case 'prompt_99k'" in err, (rc, err))
rc, out, err = run(["bench", "--reps", "0"])
expect("bench --reps 0", rc == 2 and "--reps='0'" in err, (rc, err))
rc, out, err = run(["bench", "--cases", "prompt_16k"])
expect("bench without a GPU", rc == 2 and "WIDEATTN_ERROR_NO_DRIVER" in err, (rc, err))
rc, out, err = run(["bench", "--kv-dtype", "fp4"])
expect("bench --kv-dtype fp4", rc == 2 and "--kv-dtype='fp4'" in err, (rc, err))
rc, out, err = run(["bench", "--q-dtype", "int8"])
expect("bench --q-dtype int8", rc == 2 and "--q-dtype='int8'" in err, (rc, err))
rc, out, err = run(["bench", "--q-dtype", "e4m3"])
expect("bench --q-dtype e4m3 without e4m3 K/V", rc == 2 and "needs --kv-dtype e4m3" in err, (rc, err))
rc, out, err = run(["bench", "--kernel", "no_such_kernel"])
expect("bench --kernel unknown", rc == 2 and "name=no_such_kernel is not a prefill kernel" in err, (rc, err))
rc, out, err = run(["bench", "--kernels", "mma_bf16_d512,no_such_kernel"])
expect("bench --kernels unknown", rc == 2 and "--kernels: name=no_such_kernel" in err, (rc, err))
rc, out, err = run(["bench", "--kernels", "mma_bf16_d512,,mma_bf16_d512"])
expect("bench --kernels empty name", rc == 2 and "has an empty name" in err, (rc, err))
rc, out, err = run(["bench", "--kernels", "reference_f64"])
expect("bench --kernels fp64", rc == 2 and "does not write bf16 output" in err, (rc, err))
rc, out, err = run(["bench", "--kernels", "mma_bf16_d512", "--kv-dtype", "e4m3"])
expect("bench --kernels with --kv-dtype", rc == 2 and "does not combine" in err, (rc, err))
rc, out, err = run(["bench", "--kernels", "mma_bf16_d512", "--cases", "prompt_4k"])
expect("bench --kernels without a GPU", rc == 2 and "WIDEATTN_ERROR_NO_DRIVER" in err, (rc, err))
rc, out, err = run(["bench", "--list"])
expect("bench --list", rc == 0 and "prompt_16k" in out and "tp4_prompt_16k" in out, (rc, out))

rc, out, err = run(["version"])
expect("version", rc == 0 and out.startswith("wideattn "), out)

print(f"cli: {len(failures)} failed")
sys.exit(1 if failures else 0)
