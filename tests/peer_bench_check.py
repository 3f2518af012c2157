#!/usr/bin/env python3
"""Checks the peer harness's interleaved timing (tools/peer_bench.py) without a GPU: torch is
replaced by a stand-in whose CUDA events read a counter the implementations advance, so the
test sees which implementation ran when and what each was timed at.
- balanced_order: over one period (len(items) repetitions, twice that for an odd count) every
  item takes every position equally often and, inside the repetitions, follows every other item
  equally often;
- time_interleaved: each repetition runs every implementation once, in balanced order (a fixed
  order made the first-listed one always run right after the last-listed, power-hungry one);
  each is timed at its own duration; one that raises is dropped with its status and the others
  go on;
- summarize_times keeps every repetition's figure (ms_all) beside the median.
usage: peer_bench_check.py PEER_BENCH_PY
"""
import collections
import importlib.util
import sys
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
    reps, warmup = 8, 1
    times, failed = pb.time_interleaved(impls, reps, warmup, copies=2, budget_s=None)
    expect(not failed, f"nothing failed: {failed}")
    timed = ran[warmup * len(names):]
    expect(len(timed) == reps * len(names), f"{reps} x {len(names)} timed runs, got {len(timed)}")
    orders = [timed[rep * len(names):(rep + 1) * len(names)] for rep in range(reps)]
    for rep, order in enumerate(orders):
        expect(order == pb.balanced_order(names, rep), f"repetition {rep} ran {order}")
    pairs = neighbours(orders)
    expect(len(pairs) == len(names) * (len(names) - 1) and len(set(pairs.values())) == 1,
           f"each implementation ran right after each other one equally often: {dict(pairs)}")
    for name in names:
        expect(times.get(name) == [durations[name]] * reps, f"{name} timed at its duration: {times.get(name)}")

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

    print(f"peer_bench_check: {'FAILED ' + str(len(failures)) if failures else 'all checks passed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
