// cta_pair_model.h - the pieces the CPU models of the two-CTA kernels' protocols share
// (tests/test_cta_pair_protocol.cpp: wgmma_bf16c2_d512 and its ordered form;
// tests/test_cta_pair_p_protocol.cpp: wgmma_bf16c2p_d512): an mbarrier with arrivals and
// transaction bytes per phase, and the random interleaving of the actors' programs with the
// copies and remote stores in flight landing at random later points.
#pragma once

#include <cstdint>
#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include <doctest/doctest.h>

namespace wideattn::cta_pair_model {

// An mbarrier: arrivals expected per phase, pending arrivals and transaction bytes of the current
// phase, phases completed. try_wait.parity(P) passes when the current phase's parity is not P.
struct MBarrier {
    int32_t expected = 0, pending = 0;
    int64_t tx = 0;
    int32_t completed = 0;

    void init(int32_t arrivals) { expected = pending = arrivals; }
    void settle() {
        if (pending == 0 && tx == 0) {
            ++completed;
            pending = expected;
        }
    }
    void arrive(int64_t expect_bytes = 0) {
        REQUIRE(pending > 0);
        tx += expect_bytes;
        --pending;
        settle();
    }
    void complete_tx(int64_t bytes) {
        tx -= bytes;
        settle();
    }
    bool passed(uint32_t parity) const { return static_cast<uint32_t>(completed & 1) != parity; }
    bool idle() const { return pending == expected && tx == 0; }
};

// One actor's program: steps that either run (return true) or are blocked (return false, no effect).
using Step = std::function<bool()>;

// Runs the actors' programs (actor a at step pc[a]) in a random interleaving to the end; a copy or
// store of `in_flight` lands now and then, or when nothing else can move. False on a deadlock.
inline bool run_interleaving(std::vector<std::vector<Step>>& actors, std::vector<size_t>& pc,
                             std::vector<std::function<void()>>& in_flight, std::mt19937& rng) {
    for (;;) {
        std::vector<size_t> live;
        for (size_t a = 0; a < actors.size(); ++a)
            if (pc[a] < actors[a].size()) live.push_back(a);
        if (live.empty() && in_flight.empty()) return true;
        std::uniform_int_distribution<int> coin(0, 3);
        if (!in_flight.empty() && (live.empty() || coin(rng) == 0)) {
            std::uniform_int_distribution<size_t> pick(0, in_flight.size() - 1);
            const size_t i = pick(rng);
            std::function<void()> land = std::move(in_flight[i]);
            in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
            land();
            continue;
        }
        std::shuffle(live.begin(), live.end(), rng);
        bool moved = false;
        for (size_t a : live)
            if (actors[a][pc[a]]()) {
                ++pc[a];
                moved = true;
                break;
            }
        if (!moved && in_flight.empty()) return false;
        if (!moved) {
            std::function<void()> land = std::move(in_flight.back());
            in_flight.pop_back();
            land();
        }
    }
}

}  // namespace wideattn::cta_pair_model
