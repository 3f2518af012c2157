"""cli_smoke.py - the `wideattn` CLI as a user runs it: help texts, inspect on the built
bundle, selftest without a GPU (error, and the skip flag), plan (what the dispatcher would launch
for the bench cases on an sm_90a device), bad arguments (exit 2 with a
message naming the argument: unknown options, integers out of range or malformed), and report
paths: `--json -` of the accuracy commands (JSON alone on stdout) and report paths that cannot
be written (refused before any work).

usage: python3 cli_smoke.py PATH/wideattn
"""
import json
import os
import subprocess
import sys
import tempfile

from check_lines import expect, failures


def run(args, env_extra=None):
    env = dict(os.environ)
    env["WIDEATTN_LIBCUDA"] = "/nonexistent/libcuda.so.1"  # the no-GPU path, on any machine
    env.update(env_extra or {})
    proc = subprocess.run([CLI] + args, capture_output=True, text=True, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, and errors such as a missing bundle or driver


def expect_run(label, args, want_rc, stream, fragments):
    """Runs the CLI with `args`: exit status `want_rc` and every fragment in `stream` ("out" or "err")."""
    rc, out, err = run(args)
    text = out if stream == "out" else err
    expect(label, rc == want_rc and all(f in text for f in fragments), (rc, text))


# (label, args, exit status, stream, fragments that must all stand in it)
HELP_CASES = [
    ("no command: usage, exit 2", [], EXIT_USAGE, "out", ["usage: wideattn"]),
    ("--help lists commands", ["--help"], EXIT_OK, "out", ["inspect", "selftest", "plan", "accuracy"]),
    ("inspect --help", ["inspect", "--help"], EXIT_OK, "out", ["usage: wideattn inspect"]),
    ("selftest --help", ["selftest", "--help"], EXIT_OK, "out", ["usage: wideattn selftest"]),
    ("unknown command", ["frobnicate"], EXIT_USAGE, "err", ["unknown command 'frobnicate'"]),
]
INSPECT_CASES = [
    ("inspect on a missing bundle", ["inspect", "--bundle", "/nonexistent"], EXIT_USAGE, "err",
     ["WIDEATTN_ERROR_BUNDLE", "/nonexistent"]),
    ("inspect --device -1", ["inspect", "--device", "-1"], EXIT_USAGE, "err", ["--device='-1'"]),
    ("inspect unknown option", ["inspect", "--colour"], EXIT_USAGE, "err", ["unknown argument '--colour'"]),
    ("inspect --bundle without a value", ["inspect", "--bundle"], EXIT_USAGE, "err",
     ["option --bundle needs a value"]),
    ("inspect --device without a value", ["inspect", "--device"], EXIT_USAGE, "err",
     ["option --device needs a value"]),
]
SELFTEST_AND_BENCH_CASES = [
    ("selftest without a driver fails clearly", ["selftest"], EXIT_USAGE, "err", ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("selftest --skip-without-gpu", ["selftest", "--skip-without-gpu"], EXIT_OK, "out", ["skipped, no GPU"]),
    ("selftest bad seed", ["selftest", "--seed", "abc"], EXIT_USAGE, "err", ["--seed='abc'"]),
    ("selftest --kernels of a name the bundle lacks", ["selftest", "--kernels", "reference_f64,nosuch"], EXIT_USAGE,
     "err", ["--kernels", "no kernel named nosuch"]),
    ("selftest --kernels naming nothing", ["selftest", "--kernels", ","], EXIT_USAGE, "err", ["--kernels=','"]),
    ("selftest --quick 0", ["selftest", "--quick", "0"], EXIT_USAGE, "err", ["--quick='0'"]),
    ("selftest --bundle followed by an option", ["selftest", "--bundle", "--seed", "3"], EXIT_USAGE, "err",
     ["option --bundle needs a value (next is option '--seed')"]),
    ("bench --cases without a value", ["bench", "--cases"], EXIT_USAGE, "err", ["option --cases needs a value"]),
    ("bench --reps without a value", ["bench", "--reps", "--list"], EXIT_USAGE, "err",
     ["option --reps needs a value (next is option '--list')"]),
    ("bench --kv-dtype without a value", ["bench", "--kv-dtype"], EXIT_USAGE, "err",
     ["option --kv-dtype needs a value"]),
    ("bench --json without a value", ["bench", "--json"], EXIT_USAGE, "err", ["option --json needs a value"]),
    ("bench --help", ["bench", "--help"], EXIT_OK, "out", ["usage: wideattn bench", "a single_token kernel"]),
    ("bench unknown case", ["bench", "--cases", "prompt_99k"], EXIT_USAGE, "err", ["unknown case 'prompt_99k'"]),
    # An empty --cases used to run the whole suite; an empty element was an unknown case '' or,
    # trailing, dropped.
    ("bench --cases ''", ["bench", "--cases", ""], EXIT_USAGE, "err",
     ["wideattn bench: --cases needs at least one case name"]),
    ("bench --cases empty name", ["bench", "--cases", "prompt_4k,,prompt_16k"], EXIT_USAGE, "err",
     ["wideattn bench: --cases='prompt_4k,,prompt_16k' has an empty case name"]),
    ("bench --cases trailing comma", ["bench", "--cases", "prompt_4k,"], EXIT_USAGE, "err",
     ["--cases='prompt_4k,' has an empty case name"]),
    ("bench --reps 0", ["bench", "--reps", "0"], EXIT_USAGE, "err", ["--reps='0'"]),
    ("bench without a GPU", ["bench", "--cases", "prompt_16k"], EXIT_USAGE, "err", ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("bench --kv-dtype fp4", ["bench", "--kv-dtype", "fp4"], EXIT_USAGE, "err", ["--kv-dtype='fp4'"]),
    ("bench --q-dtype int8", ["bench", "--q-dtype", "int8"], EXIT_USAGE, "err", ["--q-dtype='int8'"]),
    ("bench --q-dtype e4m3 without e4m3 K/V", ["bench", "--q-dtype", "e4m3"], EXIT_USAGE, "err",
     ["needs --kv-dtype e4m3"]),
    ("bench --kernel unknown", ["bench", "--kernel", "no_such_kernel"], EXIT_USAGE, "err",
     ["name=no_such_kernel is not a prefill kernel"]),
    ("bench --kernels unknown", ["bench", "--kernels", "mma_bf16_d512,no_such_kernel"], EXIT_USAGE, "err",
     ["--kernels: name=no_such_kernel"]),
    ("bench --kernels empty name", ["bench", "--kernels", "mma_bf16_d512,,mma_bf16_d512"], EXIT_USAGE, "err",
     ["--kernels='mma_bf16_d512,,mma_bf16_d512' has an empty kernel name"]),
    ("bench --kernels trailing comma", ["bench", "--kernels", "mma_bf16_d512,"], EXIT_USAGE, "err",
     ["--kernels='mma_bf16_d512,' has an empty kernel name"]),
    ("bench --kernels leading comma", ["bench", "--kernels", ",mma_bf16_d512"], EXIT_USAGE, "err",
     ["--kernels=',mma_bf16_d512' has an empty kernel name"]),
    ("bench --kernels fp64", ["bench", "--kernels", "reference_f64"], EXIT_USAGE, "err",
     ["does not write bf16 output"]),
    ("bench --kernels with --kv-dtype", ["bench", "--kernels", "mma_bf16_d512", "--kv-dtype", "e4m3"], EXIT_USAGE,
     "err", ["does not combine"]),
    # --reference with --kernel used to be accepted: the pin covers only its kernel's dtypes, so the
    # fp64 kernel ran and --kernel was silently ignored.
    ("bench --reference with --kernel", ["bench", "--reference", "--kernel", "mma_bf16_d512"], EXIT_USAGE, "err",
     ["wideattn bench: --reference times the fp64 reference kernel", "does not combine with --kernel or --kernels"]),
    ("bench --kernels with --reference", ["bench", "--kernels", "mma_bf16_d512", "--reference"], EXIT_USAGE, "err",
     ["wideattn bench: --reference times the fp64 reference kernel", "does not combine with --kernel or --kernels"]),
    ("bench --kernels without a GPU", ["bench", "--kernels", "mma_bf16_d512", "--cases", "prompt_4k"], EXIT_USAGE,
     "err", ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("bench --list", ["bench", "--list"], EXIT_OK, "out", ["prompt_16k", "tp4_prompt_16k", "decode_32_ctx_16k (decode)"]),
    ("bench unknown decode-like case", ["bench", "--cases", "decode_1"], EXIT_USAGE, "err", ["unknown case 'decode_1'"]),
    ("bench --list decode suite", ["bench", "--list"], EXIT_OK, "out",
     ["decode_1_ctx_128k (decode)", "verify5_32_ctx_20k (decode)", "mixed_chunk_2k_decode_63 (decode)",
      "chunk_2k_ctx_4k (decode)", "decode_63_ctx_8k (decode)", "verify4_16_ctx_8k (decode)"]),
    ("bench --help decode", ["bench", "--help"], EXIT_OK, "out",
     ["--suite S", "kv_gbps", "pct_copy_bw_before", "fp8_bf16_time_ratio", "mixed_batch_ratios", "num_splits"]),
    ("bench --help ceilings", ["bench", "--help"], EXIT_OK, "out",
     ["pct_read_bw_before", "read_bandwidth_gbps_before", "pct_fp8_wgmma_rate", "pct_wgmma_rate",
      "wgmma_e4m3_rate_tflops_before", "wgmma_bf16_rate_tflops_before", "%read", "%wgmma"]),
    ("bench --suite unknown", ["bench", "--suite", "sideways"], EXIT_USAGE, "err",
     ["--suite='sideways' is not prefill or decode"]),
    ("bench --suite without a value", ["bench", "--suite"], EXIT_USAGE, "err", ["option --suite needs a value"]),
    ("bench --pdl unknown", ["bench", "--pdl", "maybe"], EXIT_USAGE, "err", ["--pdl='maybe' is not on, off or both"]),
    ("bench --pdl without a value", ["bench", "--pdl"], EXIT_USAGE, "err", ["option --pdl needs a value"]),
    ("bench --timing unknown", ["bench", "--timing", "later"], EXIT_USAGE, "err",
     ["--timing='later' is not call or queued"]),
    ("bench --timing without a value", ["bench", "--timing"], EXIT_USAGE, "err", ["option --timing needs a value"]),
    ("bench --kfv-cos-sin unknown", ["bench", "--kfv-cos-sin", "cached"], EXIT_USAGE, "err",
     ["--kfv-cos-sin='cached' is not formula or table"]),
    ("bench --kfv-cos-sin without a value", ["bench", "--kfv-cos-sin"], EXIT_USAGE, "err",
     ["option --kfv-cos-sin needs a value"]),
    ("bench --kfv-cos-sin table without a K-from-V kernel", ["bench", "--kfv-cos-sin", "table"], EXIT_USAGE, "err",
     ["--kfv-cos-sin table gives K-from-V calls a cos / sin table, and no variant makes K-from-V calls"]),
    ("bench --kfv-cos-sin table with --suite decode", ["bench", "--suite", "decode", "--kfv-cos-sin", "table"],
     EXIT_USAGE, "err", ["no variant makes K-from-V calls"]),
    ("bench --kfv-cos-sin table with a K-from-V kernel, without a GPU",
     ["bench", "--kfv-cos-sin", "table", "--kernel", "decode_bf16kfv_d512", "--cases", "decode_1_ctx_32k"],
     EXIT_USAGE, "err", ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("bench --help kfv-cos-sin", ["bench", "--help"], EXIT_OK, "out", ["--kfv-cos-sin S", "kfv_cos_sin"]),
    ("bench --splits past the most", ["bench", "--splits", "129"], EXIT_USAGE, "err", ["--splits", "129"]),
    ("bench --splits not a number", ["bench", "--splits", "many"], EXIT_USAGE, "err", ["--splits", "many"]),
    ("bench --pdl both without a GPU", ["bench", "--pdl", "both", "--cases", "decode_1_ctx_32k"], EXIT_USAGE, "err",
     ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("bench --suite decode with --kv-dtype", ["bench", "--suite", "decode", "--kv-dtype", "e4m3"], EXIT_USAGE, "err",
     ["--suite decode", "does not combine"]),
    ("bench --suite decode with --kernel", ["bench", "--suite", "decode", "--kernel", "mma_bf16_d512"], EXIT_USAGE,
     "err", ["--suite decode", "does not combine"]),
    ("bench --suite decode without a GPU", ["bench", "--suite", "decode"], EXIT_USAGE, "err",
     ["WIDEATTN_ERROR_NO_DRIVER"]),
    ("bench new decode case without a GPU", ["bench", "--cases", "decode_1_ctx_128k"], EXIT_USAGE, "err",
     ["WIDEATTN_ERROR_NO_DRIVER"]),
]
TUNE_CASES = [
    ("tune --help", ["tune", "--help"], EXIT_OK, "out", ["usage: wideattn tune", "--out FILE", "prefill_short",
                                                          "decode_single: total_q <= num_seqs"]),
    ("tune without a GPU exits 2", ["tune"], EXIT_USAGE, "err", ["wideattn tune: needs a GPU", "WIDEATTN_ERROR_NO_DRIVER"]),
    ("tune --reps 0", ["tune", "--reps", "0"], EXIT_USAGE, "err", ["--reps='0'"]),
    ("tune unknown case", ["tune", "--cases", "prompt_4k,prompt_99k"], EXIT_USAGE, "err", ["unknown case 'prompt_99k'"]),
    ("tune --cases ''", ["tune", "--cases", ""], EXIT_USAGE, "err",
     ["wideattn tune: --cases needs at least one case name"]),
    ("tune --cases starting with a comma", ["tune", "--cases", ",prompt_4k"], EXIT_USAGE, "err",
     ["wideattn tune: --cases=',prompt_4k' has an empty case name"]),
    ("tune --out without a value", ["tune", "--out"], EXIT_USAGE, "err", ["option --out needs a value"]),
    ("tune unknown option", ["tune", "--fast"], EXIT_USAGE, "err", ["unknown argument '--fast'"]),
    ("--help lists tune", ["--help"], EXIT_OK, "out", ["tune"]),
]
# Integer options are range-checked, never wrapped (4294967296 used to run on device 0, 4294967297
# reps ran once), and every subcommand refuses an argument it does not know.
INTEGER_AND_UNKNOWN_CASES = [
    ("inspect --device 2^32", ["inspect", "--device", "4294967296"], EXIT_USAGE, "err",
     ["wideattn inspect: --device='4294967296' is not an integer in 0..2147483647"]),
    ("selftest --device 2^32", ["selftest", "--device", "4294967296"], EXIT_USAGE, "err",
     ["--device='4294967296' is not an integer in 0..2147483647"]),
    ("bench --device 2^32", ["bench", "--device", "4294967296"], EXIT_USAGE, "err",
     ["--device='4294967296' is not an integer in 0..2147483647"]),
    ("bench --reps 2^32 + 1", ["bench", "--reps", "4294967297"], EXIT_USAGE, "err",
     ["wideattn bench: --reps='4294967297' is not an integer in 1..1000000"]),
    ("bench --warmup 2^32", ["bench", "--warmup", "4294967296"], EXIT_USAGE, "err",
     ["--warmup='4294967296' is not an integer in 0..1000000"]),
    ("bench --warmup -1", ["bench", "--warmup", "-1"], EXIT_USAGE, "err", ["--warmup='-1' is not an integer"]),
    ("tune --reps 2^32 + 1", ["tune", "--reps", "4294967297"], EXIT_USAGE, "err",
     ["wideattn tune: --reps='4294967297' is not an integer in 1..1000000"]),
    ("tune --device 2^32", ["tune", "--device", "4294967296"], EXIT_USAGE, "err",
     ["--device='4294967296' is not an integer in 0..2147483647"]),
    ("selftest --quick 2^32 + 1", ["selftest", "--quick", "4294967297"], EXIT_USAGE, "err",
     ["--quick='4294967297' is not an integer in 1..2147483647"]),
    ("selftest --seed beyond int64", ["selftest", "--seed", "9223372036854775808"], EXIT_USAGE, "err",
     ["--seed='9223372036854775808' is not an integer in 0..9223372036854775807"]),
    ("inspect --device +1", ["inspect", "--device", "+1"], EXIT_USAGE, "err", ["--device='+1' is not an integer"]),
    ("inspect --device ' 1'", ["inspect", "--device", " 1"], EXIT_USAGE, "err", ["--device=' 1' is not an integer"]),
    ("inspect --device 0x1", ["inspect", "--device", "0x1"], EXIT_USAGE, "err", ["--device='0x1' is not an integer"]),
    ("inspect --device 1k", ["inspect", "--device", "1k"], EXIT_USAGE, "err", ["--device='1k' is not an integer"]),
    ("inspect --device ''", ["inspect", "--device", ""], EXIT_USAGE, "err", ["--device='' is not an integer"]),
    ("accuracy without a subcommand", ["accuracy"], EXIT_USAGE, "err",
     ["wideattn accuracy: error: missing subcommand (see --help)"]),
    ("make-sample OUTDIR under a file", ["accuracy", "make-sample", os.path.abspath(__file__) + "/sub"], EXIT_USAGE,
     "err", ["wideattn accuracy make-sample: error: cannot create OUTDIR '"]),
    ("make-attn-sample in a missing directory", ["accuracy", "make-attn-sample", "/nonexistent/reports/a.h5"],
     EXIT_USAGE, "err", ["cannot create HDF5 file '/nonexistent/reports/a.h5': No such file or directory"]),
    ("version --bogus", ["version", "--bogus"], EXIT_USAGE, "err",
     ["wideattn version: unknown argument '--bogus' (see --help)"]),
    ("version extra", ["version", "extra"], EXIT_USAGE, "err", ["unknown argument 'extra'"]),
    ("version --help", ["version", "--help"], EXIT_OK, "out", ["usage: wideattn version"]),
    ("selftest unknown option", ["selftest", "--bogus"], EXIT_USAGE, "err", ["unknown argument '--bogus'"]),
    ("bench unknown option", ["bench", "--bogus"], EXIT_USAGE, "err", ["unknown argument '--bogus'"]),
    ("bench --e4m3-scale below its range", ["bench", "--e4m3-scale", "0.001"], EXIT_USAGE, "err",
     ["wideattn bench: --e4m3-scale='0.001' is not a number in 0.003..1"]),
    ("bench --e4m3-scale not a number", ["bench", "--e4m3-scale", "1e"], EXIT_USAGE, "err",
     ["--e4m3-scale='1e' is not a number"]),
]

PLAN_CASES = [
    ("plan --help", ["plan", "--help"], EXIT_OK, "out", ["usage: wideattn plan", "--sms N", "split_keys"]),
    ("plan --arch malformed", ["plan", "--arch", "sm90"], EXIT_USAGE, "err",
     ["wideattn plan: --arch='sm90' is not an arch name"]),
    ("plan --sms 0", ["plan", "--sms", "0"], EXIT_USAGE, "err", ["wideattn plan: --sms='0' is not an integer in 1.."]),
    ("plan --splits 129", ["plan", "--splits", "129"], EXIT_USAGE, "err", ["--splits='129' is not an integer in 0..128"]),
    ("plan --v-transposed without e4m3", ["plan", "--v-transposed"], EXIT_USAGE, "err", ["needs --kv-dtype e4m3"]),
    ("plan --q-dtype e4m3 alone", ["plan", "--q-dtype", "e4m3"], EXIT_USAGE, "err", ["needs --kv-dtype e4m3"]),
    ("plan unknown case", ["plan", "--cases", "decode_2_ctx_1k"], EXIT_USAGE, "err",
     ["wideattn plan: --cases: unknown case 'decode_2_ctx_1k'"]),
    ("plan --kernel of no kernel", ["plan", "--kernel", "nosuch"], EXIT_USAGE, "err",
     ["wideattn plan: --kernel: name=nosuch is not a prefill kernel of the bundle"]),
    ("plan --json in a missing directory", ["plan", "--json", "/nonexistent/reports/p.json"], EXIT_USAGE, "err",
     ["wideattn plan: cannot write --json '/nonexistent/reports/p.json'"]),
    ("plan unknown option", ["plan", "--bogus"], EXIT_USAGE, "err", ["wideattn plan: unknown argument '--bogus'"]),
    ("plan --seqs without --context", ["plan", "--seqs", "4"], EXIT_USAGE, "err", ["give --context"]),
    ("plan --context with --cases", ["plan", "--context", "100", "--cases", "prompt_4k"], EXIT_USAGE, "err",
     ["not with --cases or --suite"]),
    ("plan --heads not dividing", ["plan", "--context", "5", "--heads", "8,3"], EXIT_USAGE, "err",
     ["--heads='8,3' is not HQ,HKV"]),
    ("plan --context -1", ["plan", "--context", "-1"], EXIT_USAGE, "err", ["--context='-1' is not an integer in 0.."]),
    ("plan --kv-dtype fp16", ["plan", "--kv-dtype", "fp16"], EXIT_USAGE, "err",
     ["wideattn plan: --kv-dtype='fp16' is not bf16 or e4m3"]),
    ("plan --suite other", ["plan", "--suite", "other"], EXIT_USAGE, "err",
     ["wideattn plan: --suite='other' is not prefill, decode or all"]),
    ("plan --json without a value", ["plan", "--json"], EXIT_USAGE, "err", ["option --json needs a value"]),
    ("plan: a case too large for the tool's block table", ["plan", "--context", "67108864", "--seqs", "65536"],
     EXIT_USAGE, "err", ["block-table entries, more than the 67108864"]),
]

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
SAMPLE = {role: os.path.join(DATA, f"sample_{role}.h5") for role in ("reference", "baseline", "candidate_pass")}
MISSING_DIR = "/nonexistent/reports"
# A report path in a missing directory is refused before the dumps are read or a GPU is opened:
# nothing on stdout, the path and the reason on stderr.
UNWRITABLE_REPORT_CASES = [
    ("gate --json in a missing directory", ["accuracy", "gate", SAMPLE["reference"], SAMPLE["candidate_pass"],
                                            "--baseline", SAMPLE["baseline"], "--json", MISSING_DIR + "/g.json"],
     EXIT_USAGE, "err", [f"cannot write JSON report '{MISSING_DIR}/g.json': No such file or directory"]),
    ("kl --json on a directory", ["accuracy", "kl", SAMPLE["reference"], SAMPLE["candidate_pass"], "--json", DATA],
     EXIT_USAGE, "err", ["cannot write JSON report", "Is a directory"]),
    ("bench --json in a missing directory", ["bench", "--cases", "prompt_4k", "--json", MISSING_DIR + "/b.json"],
     EXIT_USAGE, "err", [f"wideattn bench: cannot write --json '{MISSING_DIR}/b.json': No such file or directory"]),
    ("tune --out in a missing directory", ["tune", "--out", MISSING_DIR + "/t.json"], EXIT_USAGE, "err",
     [f"wideattn tune: cannot write --out '{MISSING_DIR}/t.json': No such file or directory"]),
]


def check_json_on_stdout(label, args, want_rc):
    """`args` with `--json -`: exit `want_rc`, stdout one JSON document, the text report on stderr."""
    rc, out, err = run(args + ["--json", "-"])
    try:
        report = json.loads(out)
    except ValueError:
        report = None
    expect(label, rc == want_rc and report is not None and "Mean    KLD" in err, (rc, out[:300], err[:300]))


CLI = sys.argv[1]

for case in HELP_CASES:
    expect_run(*case)

rc, out, err = run(["inspect"])
expect("inspect lists the fp64 kernel", rc == EXIT_OK and "reference_f64" in out and "ptxas" in out, (rc, out, err))
archs = os.environ.get("WIDEATTN_TEST_ARCHS", "").split(",")
for arch in filter(None, archs):
    expect(f"inspect shows {arch}", f" {arch} " in out, out)
# Columns line up however long the kernel names are (merge_splits_bf16 and wgmma_e4m3kv_d512,
# 17 characters, used to push their rows one column right).
lines = out.splitlines()
header = next((i for i, line in enumerate(lines) if line.startswith("kernel ")), None)
if header is not None:
    arch_column = lines[header].index(" arch ") + 1
    rows = [line for line in lines[header + 1:] if line.strip()]
    misaligned = [row for row in rows if not (row[arch_column - 1] == " " and row[arch_column:].startswith("sm_"))]
    expect("inspect columns line up", rows and not misaligned, misaligned)
else:
    expect("inspect prints its table header", False, out)
# Without a driver every row comes from the ptxas report: its spill column is the manifest's spill
# stores / spill loads (it used to print their sum, 24 for 12 stored + 12 loaded, under "spill").
MANIFEST = os.path.join(os.path.dirname(os.path.abspath(CLI)), "..", "bundle", "manifest.json")
with open(MANIFEST) as manifest_file:
    spills = {(k["name"], k["arch"]): f"{k['ptxas']['spill_stores']}/{k['ptxas']['spill_loads']}"
              for k in json.load(manifest_file)["kernels"]}
expect("inspect labels the spill column stores/loads", header is not None and " spill st/ld " in lines[header],
       lines[header] if header is not None else out)
SPILL_FIELD = 9  # name arch q/kv/o head_dim group tile threads smem regs SPILL stack source features
shown = {tuple(row.split()[:2]): row.split()[SPILL_FIELD] for row in (rows if header is not None else [])}
expect("inspect shows every kernel's ptxas spill stores/loads", shown == spills, (shown, spills))
for case in INSPECT_CASES + SELFTEST_AND_BENCH_CASES + TUNE_CASES + INTEGER_AND_UNKNOWN_CASES:
    expect_run(*case)

# inspect shows which selection is in force: none here (the tests set WIDEATTN_TUNING=off), and a
# malformed named file is an error that names it.
expect("inspect shows the bundle checksum and the tuning state",
       "bundle checksum: " in out and "tuning none: tuning files are off" in out, out)
rc, _, err = run(["inspect"], {"WIDEATTN_TUNING": "/nonexistent/tuning.json"})
expect("inspect with a missing named tuning file", rc == EXIT_USAGE and "/nonexistent/tuning.json" in err, (rc, err))

for case in UNWRITABLE_REPORT_CASES:
    expect_run(*case)
    expect(case[0] + ": no report printed", run(case[1])[1] == "", case[1])
check_json_on_stdout("kl --json -", ["accuracy", "kl", SAMPLE["reference"], SAMPLE["candidate_pass"]], EXIT_OK)
check_json_on_stdout("gate --json -", ["accuracy", "gate", SAMPLE["reference"], SAMPLE["candidate_pass"],
                                       "--baseline", SAMPLE["baseline"]], EXIT_OK)

# `wideattn plan`: bad arguments, then the plans of the decode suite on an sm_90a device where the
# bundle holds sm_90a cubins (the 1 x 32k decode: the 4-warp BF16 decode kernel, 32 splits of whole
# 16-key granules in the build's form of the ranges, the rows merge), the JSON report, and a
# refusal printed in its row.
EVEN_SPLIT_RANGES = os.environ.get("WIDEATTN_TEST_SPLIT_RANGES", "rounded") == "even"
for case in PLAN_CASES:
    expect_run(*case)
if "sm_90a" in archs:
    rc, out, err = run(["plan", "--cases", "decode_1_ctx_32k,verify5_1_ctx_20k,prompt_4k"])
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}
    expect("plan: 1 x 32k on sm_90a", rc == EXIT_OK and all(f in rows.get("decode_1_ctx_32k", "") for f in
                                                              ("decode_bf16w4_d512", " 32 ", "merge_splits_bf16_rows",
                                                               "31 x 1024, 1 x 1025" if EVEN_SPLIT_RANGES
                                                               else "31 x 1040, 1 x 529")), (rc, out, err))
    expect("plan: the 5-token verification's splits (even: the last holds the partial granule; rounded: "
           "30 shares, the rest, an empty split)",
           ("31 x 640, 1 x 645" if EVEN_SPLIT_RANGES else "30 x 672, 1 x 325, 1 x 0") in rows.get("verify5_1_ctx_20k", ""),
           out)
    expect("plan: a prompt does not split", rows.get("prompt_4k", "").split()[4:6] == ["1", "-"], out)
    handle, json_path = tempfile.mkstemp(prefix="cli_smoke_plan_", suffix=".json")
    os.close(handle)
    rc, out, err = run(["plan", "--cases", "decode_1_ctx_128k", "--sms", "100", "--json", json_path])
    with open(json_path) as plan_file:
        plan = json.load(plan_file)
    entry = plan["cases"][0]
    expect("plan --json", rc == EXIT_OK and plan["arch"] == "sm_90a" and plan["sms"] == 100 and
           entry["case"] == "decode_1_ctx_128k" and sum(entry["split_keys"]) == entry["max_seqlen_k"] and
           len(entry["split_keys"]) == entry["num_splits"] and entry["workspace_bytes"] > 0, (rc, plan, err))
    os.remove(json_path)
    rc, out, err = run(["plan", "--context", "20480", "--q-len", "5", "--seqs", "2", "--heads", "8,1"])
    row = next((line for line in out.splitlines() if line.startswith("custom_2x5_ctx_20480 ")), "")
    expect("plan: a case of one's own (2 sequences of 5 tokens at 20k, a TP=4 rank's heads)",
           rc == EXIT_OK and row.split()[1:3] == ["10", "2"] and "wgmma_bf16_d512" in row, (rc, out, err))
    rc, out, err = run(["plan", "--cases", "prompt_4k", "--k-from-v"])
    expect("plan: a refused case prints the library's message in its row, exit 1",
           rc == 1 and "prompt_4k" in out and "error: no kernel in the bundle" in out, (rc, out, err))

rc, out, err = run(["version"])
expect("version", rc == EXIT_OK and out.startswith("wideattn "), out)

print(f"cli: {len(failures)} failed")
sys.exit(1 if failures else 0)
