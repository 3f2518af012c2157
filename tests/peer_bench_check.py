#!/usr/bin/env python3
"""Checks the peer harness's interleaved timing (tools/bench/peer_bench.py) without a GPU: torch is
replaced by a stand-in whose CUDA events read a counter the implementations advance, so the
test sees which implementation ran when and what each was timed at.
- balanced_order: over one period (len(items) repetitions, twice that for an odd count) every
  item takes every position equally often and, inside the repetitions, follows every other item
  equally often;
- balanced_sequence: one cyclic period in which every item follows every other item exactly
  once (wrap-around included) and each item runs len(items) - 1 times;
- time_interleaved: runs the implementations in that sequence, repeated, so that over whole
  periods every implementation is timed right after every other one equally often, the first
  timed run (after the warm-ups) included (a fixed order made the first-listed one always run
  right after the last-listed, power-hungry one; balanced_order still paired the same items
  from one repetition to the next); each is timed at its own duration; one that raises is
  dropped with its status and the others go on;
- summarize_times keeps every repetition's figure (ms_all) beside the median;
- time_interleaved's ran_after names the implementation launched right before every timed run;
- tools/bench/peer_predecessors.py groups the figures by that predecessor (recorded, or reconstructed
  from the balanced order for older reports), and refuses a report without them, a file that
  is not a report and a missing argument (exit 2, naming the file);
- decode mode: the decode suite's shapes (names, q_lens, contexts, the mixed batch and its parts),
  the K/V byte count, the copy bandwidth (read + write), the copy percentages, speedups per K/V
  dtype, the mixed / (chunk + decodes) ratio and the table on a made-up report; the Triton decode
  peer's split count and row padding (tools/bench/peers/triton_paged_decode.py, imported with a
  stand-in triton); usage errors exit 2 naming the option and its value.
usage: peer_bench_check.py PEER_BENCH_PY PEER_PREDECESSORS_PY
"""
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types


class FakeClock:
    now = 0.0


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self):
        self.at = FakeClock.now

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at


def install_fake_torch():
    cuda = types.SimpleNamespace(Event=FakeEvent, synchronize=lambda: None, empty_cache=lambda: None,
                                 OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {}))
    sys.modules["torch"] = types.SimpleNamespace(cuda=cuda)


def load(path):
    spec = importlib.util.spec_from_file_location("peer_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_decode(pb, expect):
    """The decode suite, byte counting and the decode report's derived figures and table."""
    suite = {case.name: case for case in pb.build_decode_suite()}
    expect(list(suite) == ["decode-1@32k", "decode-1@128k", "decode-8@32k", "decode-64@8k", "decode-128@4k",
                           "verify5-1@20k", "verify5-32@20k", "mixed-chunk2k-decode63", "chunk-2k@4k", "decode-63@8k"],
           f"the decode suite's cases: {list(suite)}")
    shapes = {"decode-1@32k": (1, 1, 32768), "decode-1@128k": (1, 1, 131072), "decode-8@32k": (8, 1, 32768),
              "decode-64@8k": (64, 1, 8192), "decode-128@4k": (128, 1, 4096), "verify5-1@20k": (1, 5, 20480), "verify5-32@20k": (32, 5, 20480),
              "decode-63@8k": (63, 1, 8192)}
    for name, (count, q_len, context) in shapes.items():
        case = suite[name]
        expect(case.q_lens == (q_len,) * count and case.contexts == (context,) * count
               and (case.num_q_heads, case.num_kv_heads, case.head_dim) == (32, 4, 512),
               f"{name}: {count} x q_len {q_len} at context {context}: {case}")
    mixed, chunk = suite["mixed-chunk2k-decode63"], suite["chunk-2k@4k"]
    expect(mixed.q_lens == (2048,) + (1,) * 63 and mixed.contexts == (4096,) + (8192,) * 63
           and mixed.seq_lens_k[0] == 6144, f"the mixed batch: {mixed}")
    expect(chunk.q_lens == (2048,) and chunk.seq_lens_k == (6144,), f"the chunk alone: {chunk}")
    quick = {case.name: case for case in pb.build_decode_suite(quick=True)}
    expect(quick["verify5-32@20k"].q_lens == (5,) * 32 and quick["verify5-32@20k"].contexts == (2560,) * 32
           and quick["mixed-chunk2k-decode63"].q_lens[0] == 256,
           f"--quick divides the contexts and the chunk, not the decode tokens: {quick['verify5-32@20k']}")
    # 32769 keys x 4 KV heads x 512 dims, K and V.
    expect(pb.kv_read_bytes(suite["decode-1@32k"], 2) == 2 * 32769 * 4 * 512 * 2
           and pb.kv_read_bytes(suite["decode-1@32k"], 1) == 32769 * 4 * 512 * 2,
           f"K/V bytes of decode-1@32k: {pb.kv_read_bytes(suite['decode-1@32k'], 2)}")
    expect(pb.kv_read_bytes(mixed, 2) == 2 * (6144 + 63 * 8193) * 4 * 512 * 2,
           "K/V bytes of the mixed batch count every sequence's keys once")
    expect(abs(pb.copy_gbps(1 << 30, 1.0) - 2 * (1 << 30) / 1e6) < 1e-6, "copy bandwidth counts read + write")
    expect(pb.pct(50.0, 200.0) == 25.0 and pb.pct(1.0, None) is None, "percentages of a ceiling")

    def entry(ms, gbps=None):
        return {"status": "ok", "ms_median": ms, "ms_min": ms, "ms_p90": ms, "gbps": gbps}

    cases = []
    for name, factor in (("mixed-chunk2k-decode63", 3.0), ("chunk-2k@4k", 1.0), ("decode-63@8k", 1.0)):
        impls = {"wideattn": entry(factor * 1.0, 100.0), "triton-decode": entry(factor * 2.0, 50.0),
                 "wideattn-e4m3": entry(factor * 0.5, 150.0)}
        cases.append({"name": name, "impls": impls})
        pb.fill_speedups(cases[-1])
    report = {"rates": {"copy_gbps_before": 400.0, "copy_gbps_after": 500.0}, "cases": cases}
    pb.fill_copy_percentages(report)
    wa = cases[0]["impls"]["wideattn"]
    expect(wa["pct_copy_before"] == 25.0 and wa["pct_copy_after"] == 20.0,
           f"GB/s as % of the copy bandwidth at the start and end: {wa}")
    expect(cases[0]["impls"]["triton-decode"].get("wideattn_speedup") == 2.0
           and "wideattn_speedup" not in cases[0]["impls"]["wideattn-e4m3"],
           f"speedup over the wideattn of the same K/V dtype only: {cases[0]['impls']}")
    ratios = pb.mixed_ratios(report)
    expect(set(ratios) == {"wideattn", "triton-decode", "wideattn-e4m3"}
           and abs(ratios["wideattn"]["ratio"] - 1.5) < 1e-12,
           f"mixed / (chunk + decodes) = 3 / (1 + 1): {ratios}")
    expect(pb.mixed_ratios({"cases": cases[:2]}) == {}, "no mixed ratio without all three cases")
    report["mixed_ratios"] = ratios
    table = pb.format_decode_table(report).splitlines()
    row = next((line for line in table if line.startswith("mixed-chunk2k-decode63") and " triton-decode " in line),
               "")
    expect(row.split()[2:9] == ["6.000", "6.000", "6.000", "50", "12.5", "10.0", "2.00"],
           f"the table row has ms, GB/s, both copy percentages and the speedup: {row!r}")
    expect(any("= 1.500" in line for line in table), f"the table ends with the mixed ratios: {table[-3:]}")


def check_decode_peer(bench_dir, expect):
    """The Triton decode peer's host-side choices, imported with a stand-in triton."""
    language = types.SimpleNamespace(constexpr=int)
    sys.modules["triton"] = types.SimpleNamespace(
        jit=lambda fn: fn, language=language,
        next_power_of_2=lambda n: 1 << max(0, (n - 1).bit_length()))
    sys.modules["triton.language"] = language
    spec = importlib.util.spec_from_file_location("triton_paged_decode",
                                                  os.path.join(bench_dir, "peers", "triton_paged_decode.py"))
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    rows = {q_len: peer.block_rows(8, q_len) for q_len in range(1, peer.MAX_Q_LEN + 1)}
    expect(rows == {1: 16, 2: 16, 3: 32, 4: 32, 5: 64, 6: 64, 7: 64, 8: 64},
           f"stage-1 rows: 8 heads x q_len, a power of two >= 16: {rows}")
    expect(peer.choose_splits(1, 4, 32769, 132) == peer.MAX_SPLITS, "one long sequence takes the most splits")
    expect(peer.choose_splits(64, 4, 8193, 132) == 2, "64 x 4 programs on 132 SMs: 2 splits for two waves")
    expect(peer.choose_splits(1, 4, 300, 132) == 1, "at least MIN_SPLIT_KEYS keys per split")
    expect(peer.warps_for(16, peer.ENGINE_CONFIG) == 4 and peer.warps_for(64, peer.ENGINE_CONFIG) == peer.MAX_WARPS,
           "warps grow with the rows up to MAX_WARPS")


def check_rows16_peer(pb, bench_dir, expect):
    """The 16-row Triton peer of the decode mode: compared with wideattn over bf16 K/V, its search
    space 16-row blocks of packed heads (none for a group that does not divide 16 rows), the
    prefill peer imported with a stand-in triton (check_decode_peer installs it)."""
    expect("triton-rows16" in pb.DECODE_IMPLS and pb.decode_peer_of("triton-rows16") == "wideattn"
           and "triton-rows16" not in pb.E4M3_IMPLS, "the 16-row peer is a bf16 decode peer of wideattn")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    space = pb.rows16_space(8)
    expect(len(space) == len(pb.ROWS16_BLOCK_N) * len(pb.ROWS16_WARPS) * len(pb.ROWS16_STAGES)
           and all(c.block_m == 16 and c.pack_heads for c in space),
           f"16-row configurations with packed heads for group 8: {[c.label() for c in space]}")
    expect(pb.rows16_space(3) == [], "no 16-row configuration for group 3")
    case = {"name": "decode-64@8k", "impls": {"wideattn": {"status": "ok", "ms_median": 1.0},
                                             "triton-rows16": {"status": "ok", "ms_median": 0.9}}}
    pb.fill_speedups(case)
    expect(abs(case["impls"]["triton-rows16"].get("wideattn_speedup", 0) - 0.9) < 1e-12,
           f"the 16-row peer's speedup is over the bf16 wideattn: {case['impls']}")


def check_transposed_v(pb, expect):
    """The transposed-V implementation of the decode mode: an 8-bit wideattn implementation with
    no peer of its own, and the slot interleave of include/wideattn.h (each group of 16 slots a
    permutation, the header's examples)."""
    expect(pb.IMPL_WIDEATTN_E4M3_VT in pb.DECODE_IMPLS and pb.IMPL_WIDEATTN_E4M3_VT in pb.E4M3_IMPLS
           and pb.IMPL_WIDEATTN_E4M3_VT in pb.WIDEATTN_DECODE_IMPLS
           and pb.IMPL_WIDEATTN_E4M3_VT not in pb.DECODE_BASELINE.values(),
           "wideattn-e4m3-vt is an e4m3 wideattn implementation that no peer is compared with")
    def err(mean_abs, source_mean_abs):
        stats = {"mean_abs": mean_abs, "max_abs": 4 * mean_abs, "rel_l2": 2 * mean_abs}
        stats["vs_source"] = {"mean_abs": source_mean_abs, "max_abs": 4 * source_mean_abs,
                              "rel_l2": 2 * source_mean_abs}
        return stats

    case = {"name": "verify5-1@20k", "impls": {
        "wideattn": {"status": "ok", "error": err(1.0, 3.0)},
        "wideattn-e4m3": {"status": "ok", "error": err(10.0, 12.0)},
        "wideattn-e4m3-vt": {"status": "ok", "error": err(20.0, 15.0)},
        "triton-decode-e4m3": {"status": "ok", "error": err(1.0, 10.0)}}}
    pb.fill_error_ratios(case)
    vt = case["impls"]["wideattn-e4m3-vt"].get("error_vs_peer", {})
    expect(vt.get("dequantised", {}).get("mean_abs") == 20.0 and vt.get("source", {}).get("max_abs") == 1.5
           and "error_vs_peer" not in case["impls"]["wideattn"],
           f"the e4m3 implementations' errors over the Triton e4m3 peer's, on both references: {case['impls']}")
    del case["impls"]["triton-decode-e4m3"]
    case["impls"]["wideattn-e4m3"].pop("error_vs_peer")
    pb.fill_error_ratios(case)
    expect("error_vs_peer" not in case["impls"]["wideattn-e4m3"], "no ratio without the peer's error")
    positions = [pb.v_slot_position(s) for s in range(32)]
    expect(positions[:16] == [0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15],
           f"the first group's interleave: {positions[:16]}")
    expect(positions[16:] == [16 + p for p in positions[:16]], f"the second group repeats it 16 on: {positions[16:]}")


def check_usage_errors(peer_bench_py, expect):
    """Each usage error exits 2 with a message naming the option and the value."""
    cases = [
        (["--mode", "decode", "--cases", "decode-1@99k"], ["--cases='decode-1@99k'", "unknown case"]),
        (["--mode", "decode", "--impls", "sdpa"], ["--impls='sdpa'", "--mode decode"]),
        (["--mode", "sideways"], ["--mode", "'sideways'"]),
        (["--cases", "decode-1@32k"], ["--cases='decode-1@32k'"]),
        (["--mode", "decode", "--reps", "0"], ["--reps='0'"]),
        (["--mode", "decode", "--kernel", "mma_bf16_d512"], ["--kernel='mma_bf16_d512'"]),
        (["--reps", "many"], ["--reps", "'many'"]),
    ]
    for argv, needles in cases:
        result = subprocess.run([sys.executable, peer_bench_py] + argv, capture_output=True, text=True)
        expect(result.returncode == 2 and all(needle in result.stderr for needle in needles),
               f"{argv}: exit 2 naming {needles}: {result.returncode} {result.stderr[-300:]}")


def main():
    install_fake_torch()
    pb = load(sys.argv[1])
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)
            print("FAIL:", what)

    def neighbours(orders):
        return collections.Counter(pair for order in orders for pair in zip(order, order[1:]))

    for count in range(1, 8):
        items = [chr(ord("a") + i) for i in range(count)]
        period = count if count % 2 == 0 else 2 * count
        orders = [pb.balanced_order(items, rep) for rep in range(period)]
        expect(all(sorted(order) == items for order in orders), f"n={count}: every order holds every item")
        for position in range(count):
            held = collections.Counter(order[position] for order in orders)
            expect(len(held) == count and len(set(held.values())) == 1,
                   f"n={count}: position {position} holds every item equally often: {dict(held)}")
        pairs = neighbours(orders)
        expected = count * (count - 1)
        expect(len(pairs) == expected and len(set(pairs.values())) <= 1,
               f"n={count}: each item follows each other equally often: {dict(pairs)}")
        expect(pb.balanced_order(items, period + 1) == orders[1 % period], f"n={count}: the order is periodic")
    expect(pb.balanced_order([], 3) == [], "an empty list gives an empty order")

    for count in range(1, 9):
        items = [chr(ord("a") + i) for i in range(count)]
        sequence = pb.balanced_sequence(items)
        runs = collections.Counter(sequence)
        expect(sorted(runs) == items and set(runs.values()) == {max(count - 1, 1)},
               f"n={count}: every item runs {max(count - 1, 1)} times per period: {dict(runs)}")
        cyclic = collections.Counter(zip(sequence, sequence[1:] + sequence[:1]))
        if count > 1:
            expect(len(cyclic) == count * (count - 1) and set(cyclic.values()) == {1}
                   and all(a != b for a, b in cyclic),
                   f"n={count}: every item follows every other item once per period: {dict(cyclic)}")
    expect(pb.balanced_sequence([]) == [], "an empty list gives an empty sequence")

    names = ["a", "b", "c", "d"]
    # Implementations whose run advances the fake clock by their own duration.
    ran = []
    durations = {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}

    def runner(name):
        def run(copy):
            ran.append(name)
            FakeClock.now += durations[name]
        return run

    impls = [pb.Impl(name, runner(name), None) for name in names]
    reps, warmup = 6, 1  # two whole periods of 3 runs each
    times, failed = pb.time_interleaved(impls, reps, warmup, copies=2, budget_s=None)
    expect(not failed, f"nothing failed: {failed}")
    timed = ran[warmup * len(names):]
    expect(len(timed) == reps * len(names), f"{reps} x {len(names)} timed runs, got {len(timed)}")
    sequence = [impl.name for impl in pb.balanced_sequence(impls)]
    expect(timed == sequence * (reps // (len(names) - 1)), f"the runs follow the balanced sequence: {timed}")
    # Every timed run with its predecessor, the first one's being the last warm-up.
    pairs = collections.Counter(zip([ran[warmup * len(names) - 1]] + timed[:-1], timed))
    expect(len(pairs) == len(names) * (len(names) - 1) and set(pairs.values()) == {2},
           f"each implementation was timed right after each other one twice: {dict(pairs)}")
    for name in names:
        expect(times.get(name) == [durations[name]] * reps, f"{name} timed at its duration: {times.get(name)}")

    # ran_after names the implementation launched right before each timed run (the last warm-up
    # for the very first one).
    ran.clear()
    after = {}
    pb.time_interleaved(impls, reps, warmup, copies=2, budget_s=None, ran_after=after)
    timed = ran[warmup * len(names):]
    launched_before = {name: [] for name in names}
    for index, name in enumerate(timed):
        launched_before[name].append(timed[index - 1] if index > 0 else ran[warmup * len(names) - 1])
    expect(after == launched_before, f"ran_after follows the launches: {after} vs {launched_before}")

    # One that raises is dropped with its status; the others keep all their repetitions.
    def broken(copy):
        raise RuntimeError("launch failed")

    impls = [pb.Impl("a", runner("a"), None), pb.Impl("x", broken, None), pb.Impl("b", runner("b"), None)]
    times, failed = pb.time_interleaved(impls, 4, 1, copies=1, budget_s=None)
    expect("x" in failed and "launch failed" in failed["x"], f"the raising implementation is named: {failed}")
    expect(len(times.get("a", [])) == 4 and len(times.get("b", [])) == 4, f"the others keep 4 reps: {times}")

    summary = pb.summarize_times([3.0, 1.0, 2.0])
    expect(summary["ms_median"] == 2.0 and summary["ms_all"] == [3.0, 1.0, 2.0] and summary["reps"] == 3,
           f"summarize_times keeps every figure in order: {summary}")

    # A report in which "b" is slow only right after "c": the table shows it in the "c" column.
    names = ["a", "b", "c"]
    ms_all = []
    for rep in range(6):
        order = pb.balanced_order(names, rep)
        place = order.index("b")
        ms_all.append(9.0 if place > 0 and order[place - 1] == "c" else 1.0)
    impls = {name: {"status": "ok", "ms_all": ms_all if name == "b" else [1.0] * 6} for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "peers.json")
        with open(report, "w") as f:
            json.dump({"cases": [{"name": "case-1", "impls": impls}]}, f)
        result = subprocess.run([sys.executable, sys.argv[2], report, "--impl", "b"], capture_output=True, text=True)
        lines = result.stdout.splitlines()
        header = next((line for line in lines if line.startswith("| case")), "")
        row = next((line for line in lines if line.startswith("| case-1")), "")
        columns = [c.strip() for c in header.strip("|").split("|")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        table = dict(zip(columns, cells))
        expect(result.returncode == 0 and table.get("c", "").startswith("9.000")
               and table.get("a", "").startswith("1.000"),
               f"peer_predecessors puts b's slow repetitions under c: {result.stdout} {result.stderr}")
        # A recorded ran_after is used as it is (here it contradicts the balanced order).
        recorded = {name: dict(entry, ran_after=["a"] * 6) for name, entry in impls.items()}
        with open(report, "w") as f:
            json.dump({"cases": [{"name": "case-1", "impls": recorded}]}, f)
        result = subprocess.run([sys.executable, sys.argv[2], report, "--impl", "b"], capture_output=True, text=True)
        expect(result.returncode == 0 and "| a |" in result.stdout and "| c |" not in result.stdout
               and "(6)" in result.stdout,
               f"peer_predecessors takes the recorded ran_after: {result.stdout} {result.stderr}")
        old = os.path.join(tmp, "old.json")
        with open(old, "w") as f:
            json.dump({"cases": [{"name": "case-1", "impls": {"b": {"status": "ok", "ms_median": 1.0}}}]}, f)
        result = subprocess.run([sys.executable, sys.argv[2], old, "--impl", "b"], capture_output=True, text=True)
        expect(result.returncode == 2 and "old.json" in result.stderr and "ms_all" in result.stderr,
               f"a report without ms_all is refused by name: {result.returncode} {result.stderr}")
        result = subprocess.run([sys.executable, sys.argv[2], report, "--impl"], capture_output=True, text=True)
        expect(result.returncode == 2 and "--impl needs a value" in result.stderr,
               f"--impl without a value is refused: {result.stderr}")
        result = subprocess.run([sys.executable, sys.argv[2]], capture_output=True, text=True)
        expect(result.returncode == 2 and "give one peers JSON file" in result.stderr,
               f"no report given is refused: {result.stderr}")
        garbled = os.path.join(tmp, "garbled.json")
        with open(garbled, "w") as f:
            f.write("{not json")
        result = subprocess.run([sys.executable, sys.argv[2], garbled], capture_output=True, text=True)
        expect(result.returncode == 2 and "garbled.json: not a peer report" in result.stderr,
               f"a file that is not a report is refused by name: {result.stderr}")
        missing = os.path.join(tmp, "absent.json")
        result = subprocess.run([sys.executable, sys.argv[2], missing], capture_output=True, text=True)
        expect(result.returncode == 2 and "absent.json: cannot read" in result.stderr,
               f"a missing file is refused by name: {result.stderr}")

    check_decode(pb, expect)
    check_decode_peer(os.path.dirname(os.path.abspath(sys.argv[1])), expect)
    check_rows16_peer(pb, os.path.dirname(os.path.abspath(sys.argv[1])), expect)
    check_transposed_v(pb, expect)
    check_usage_errors(sys.argv[1], expect)

    print(f"peer_bench_check: {'FAILED ' + str(len(failures)) if failures else 'all checks passed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
