// test_cta_pair_protocol.cpp - a CPU model of the synchronisation protocol of the two-CTA kernel
// wgmma_bf16c2_d512 (kernels/hopper/bf16c2_d512): the producer filling the K and V rings, the
// consumer warps' waits, reads and releases, the partial-score exchange between the two CTAs through
// received-scores barriers armed with expected bytes, run under random interleavings with the
// copies and the remote stores landing at random later points. The model reads the kernel's own
// constants (traits.h) and schedule (schedule.h); the consumer's sequence of operations is written
// here after mainloop.cuh, in both forms: the free-running row groups of wgmma_bf16c2_d512 and the
// turns of the ordered form (wgmma_bf16c2pp_d512: named barriers between the two row groups of a
// CTA); the producer as one thread a ring. The model sees waits, arrivals and posts, not where a
// wgmma is issued. Every run must finish (no deadlock), every read must find the tile it expects,
// no copy or store may land where a reader still needs the previous contents, every barrier must
// end with no phase half done, and every turn barrier's phase must be one turn's (its grant and
// its waiters).
#include <doctest/doctest.h>

#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "kernels/hopper/bf16c2_d512/traits.h"
#include "tests/cta_pair_model.h"

using namespace wideattn;
using namespace wideattn::hopper::bf16c2;
using namespace wideattn::cta_pair_model;

namespace {

using Traits = WgmmaBf16C2D512Traits;
constexpr int32_t kCtas = Traits::kClusterCtas;
constexpr int32_t kGroups = Traits::kRowGroups;
constexpr int32_t kWarpsPerGroup = Traits::kRowTilesPerGroup;
constexpr int32_t kParities = Traits::kExchangeParities;
constexpr int32_t kWarpPostBytes = Traits::kScoreTileBytes / kWarpsPerGroup;  // a warp's 32 threads' st.async

enum class Ring { kK, kV };

struct Cta {
    MBarrier full[2][Traits::kKSlots], empty[2][Traits::kKSlots];
    MBarrier received[kGroups][kParities];
    int32_t slot_tile[2][Traits::kKSlots];   // the tile whose copies landed in the slot (-1: none)
    int32_t holders[2][Traits::kKSlots];     // consumer warps whose wgmmas may still read the slot
    int32_t buffer_tile[kGroups][kParities];   // the tile whose pieces the received buffer holds
    int32_t buffer_pieces[kGroups][kParities];  // warps' pieces of it landed
    int32_t buffer_readers[kGroups][kParities]; // receiving warps that have read it
    int32_t consumers_arrived = 0, consumers_generation = 0;  // named barrier of the 8 consumer warps
    // The ordered form's turn barriers, one per row group (waited for by its warps, granted by the
    // other row group's): warps arrived in the current phase, phases completed, and the turn (row
    // group, step) each arrival of the current phase was for.
    int32_t turn_arrived[kGroups] = {}, turn_generation[kGroups] = {};
    int32_t turn_phase_step[kGroups] = {-1, -1};
    std::vector<int32_t> issued[kGroups];  // per step: warps of the row group that issued its products
};
static_assert(Traits::kKSlots == Traits::kVSlots, "the model indexes both rings alike");

int32_t slots(Ring) { return Traits::kKSlots; }

struct Model {
    int32_t n = 0;
    bool partial_last_tile = false;
    bool ordered = false;  // the ordered form's turns (wgmma_bf16c2pp_d512)
    bool zeroing_inside_turn = false;  // a mutation of the ordered form: the zeroing after the turn's wait
    Cta cta[kCtas];
    std::vector<std::vector<Step>> actors;
    std::vector<size_t> pc;
    std::vector<std::function<void()>> in_flight;  // copies and remote stores not landed yet

    void init() {
        for (Cta& c : cta) {
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < Traits::kKSlots; ++s) {
                    c.full[r][s].init(1);
                    c.empty[r][s].init(Traits::kConsumerWarps);
                    c.slot_tile[r][s] = -1;
                    c.holders[r][s] = 0;
                }
            for (int g = 0; g < kGroups; ++g) c.issued[g].assign(static_cast<size_t>(n), 0);
            for (int g = 0; g < kGroups; ++g)
                for (int p = 0; p < kParities; ++p) {
                    c.received[g][p].init(1);
                    c.buffer_tile[g][p] = -1;
                    c.buffer_pieces[g][p] = 0;
                    c.buffer_readers[g][p] = 0;
                    if (armed_at_start<kParities>(p, n)) c.received[g][p].arrive(Traits::kScoreTileBytes);
                }
        }
        for (int c = 0; c < kCtas; ++c) {
            add_ring_producer(c, Ring::kK);
            add_ring_producer(c, Ring::kV);
        }
        for (int c = 0; c < kCtas; ++c)
            for (int g = 0; g < kGroups; ++g)
                for (int w = 0; w < kWarpsPerGroup; ++w) add_consumer_warp(c, g, w);
        pc.assign(actors.size(), 0);
    }

    // The copies of tile `tile` into its slot of `ring`: the wait for the slot's release, then the
    // expect-bytes arrival and the copy, landing later.
    void push_load(std::vector<Step>& program, int c, Ring ring, int32_t tile) {
        const int r = static_cast<int>(ring), s = tile % slots(ring);
        if (refill_waits<Traits::kKSlots>(tile)) {
            const uint32_t parity = use_parity<Traits::kKSlots>(tile - slots(ring));
            program.push_back([this, c, r, s, parity] { return cta[c].empty[r][s].passed(parity); });
        }
        program.push_back([this, c, r, s, tile] {
            Cta& x = cta[c];
            CHECK_MESSAGE(x.holders[r][s] == 0, "a copy into a slot that a consumer still reads");
            x.full[r][s].arrive(Traits::kChunkBytes);
            in_flight.push_back([this, c, r, s, tile] {
                Cta& y = cta[c];
                CHECK(y.holders[r][s] == 0);
                y.slot_tile[r][s] = tile;
                y.full[r][s].complete_tx(Traits::kChunkBytes);
            });
            return true;
        });
    }

    // The producer: one actor a ring (the kernel's two producer threads), each filling its ring in
    // order.
    void add_ring_producer(int c, Ring ring) {
        std::vector<Step> program;
        for_each_ring_load(n, [&](int32_t tile) { push_load(program, c, ring, tile); });
        actors.push_back(std::move(program));
    }

    // The warp's steps, in mainloop.cuh's order.
    void add_consumer_warp(int c, int g, int w) {
        std::vector<Step> program;
        auto wait_full = [&](Ring ring, int32_t tile) {
            const int r = static_cast<int>(ring), s = tile % slots(ring);
            const uint32_t parity = use_parity<Traits::kKSlots>(tile);
            program.push_back([this, c, r, s, parity] { return cta[c].full[r][s].passed(parity); });
        };
        auto read_start = [&](Ring ring, int32_t tile) {  // a wgmma issued on the slot
            const int r = static_cast<int>(ring), s = tile % slots(ring);
            program.push_back([this, c, r, s, tile] {
                CHECK_MESSAGE(cta[c].slot_tile[r][s] == tile, "a wgmma reads a slot that holds another tile");
                ++cta[c].holders[r][s];
                return true;
            });
        };
        auto read_end_and_release = [&](Ring ring, int32_t tile) {  // the wgmma wait, the empty arrival
            const int r = static_cast<int>(ring), s = tile % slots(ring);
            program.push_back([this, c, r, s, tile] {
                CHECK(cta[c].slot_tile[r][s] == tile);
                --cta[c].holders[r][s];
                cta[c].empty[r][s].arrive();
                return true;
            });
        };
        auto post = [&](int32_t tile) {  // st.async of the warp's piece into the partner's buffer
            program.push_back([this, c, g, tile] {
                const int partner = 1 - c, p = exchange_parity<kParities>(tile);
                in_flight.push_back([this, partner, g, p, tile] {
                    Cta& y = cta[partner];
                    if (y.buffer_tile[g][p] != tile) {
                        CHECK_MESSAGE((y.buffer_tile[g][p] == -1 || y.buffer_readers[g][p] == kWarpsPerGroup),
                                      "scores stored over a tile the partner has not read");
                        CHECK((y.buffer_tile[g][p] == -1 || y.buffer_tile[g][p] == tile - kParities));
                        y.buffer_tile[g][p] = tile;
                        y.buffer_pieces[g][p] = 0;
                        y.buffer_readers[g][p] = 0;
                    }
                    ++y.buffer_pieces[g][p];
                    y.received[g][p].complete_tx(kWarpPostBytes);
                });
                return true;
            });
        };
        auto collect = [&](int32_t tile) {
            const int p = exchange_parity<kParities>(tile);
            const uint32_t phase = exchange_phase<kParities>(tile);
            const bool rearm = rearm_after<kParities>(tile, n) && w == 0;  // thread 0 is in warp 0
            program.push_back([this, c, g, p, phase] { return cta[c].received[g][p].passed(phase); });
            program.push_back([this, c, g, p, tile, rearm] {
                Cta& x = cta[c];
                if (rearm) x.received[g][p].arrive(Traits::kScoreTileBytes);
                CHECK_MESSAGE(x.buffer_tile[g][p] == tile, "scores collected before the tile's stores landed");
                CHECK(x.buffer_pieces[g][p] == kWarpsPerGroup);
                ++x.buffer_readers[g][p];
                return true;
            });
        };
        auto consumers_barrier = [&] {
            auto generation = std::make_shared<int32_t>(-1);
            program.push_back([this, c, generation] {
                Cta& x = cta[c];
                *generation = x.consumers_generation;
                if (++x.consumers_arrived == Traits::kConsumerWarps) {
                    x.consumers_arrived = 0;
                    ++x.consumers_generation;
                }
                return true;
            });
            program.push_back([this, c, generation] { return cta[c].consumers_generation != *generation; });
        };

        // A named barrier of kConsumerWarps warps per phase, one per row group: the turn of row
        // group `owner` at `step`, joined by arriving (a grant) or by waiting (bar.sync).
        auto turn_join = [&](int owner, int32_t step) {
            program.push_back([this, c, owner, step] {
                Cta& x = cta[c];
                if (x.turn_arrived[owner] == 0) x.turn_phase_step[owner] = step;
                CHECK_MESSAGE(x.turn_phase_step[owner] == step, "a turn barrier's phase mixes two turns");
                if (++x.turn_arrived[owner] == Traits::kConsumerWarps) {
                    x.turn_arrived[owner] = 0;
                    ++x.turn_generation[owner];
                }
                return true;
            });
        };
        auto take_turn = [&](int32_t step) {
            if (!turn_waits(g, step)) return;
            auto generation = std::make_shared<int32_t>(-1);
            program.push_back([this, c, g, generation] {
                *generation = cta[c].turn_generation[g];
                return true;
            });
            turn_join(g, step);
            program.push_back([this, c, g, generation] { return cta[c].turn_generation[g] != *generation; });
        };
        auto end_turn = [&](int32_t step) {
            if (!turn_grants(g, step, n)) return;
            const int next = next_turn_group(g);
            turn_join(next, next > g ? step : step + 1);  // the next turn: the other row group's
        };
        auto zero_last_tile = [&](int32_t j) {
            const int s = j % Traits::kVSlots;
            program.push_back([this, c, s, j] {  // the zeroing stores into the V tile
                CHECK(cta[c].slot_tile[static_cast<int>(Ring::kV)][s] == j);
                return true;
            });
            consumers_barrier();
        };

        if (n > 0) {
            wait_full(Ring::kK, 0);
            read_start(Ring::kK, 0);
            read_end_and_release(Ring::kK, 0);
            post(0);
            collect(0);
        }
        if (ordered) {  // consumer_mainloop_ordered's order
            for (int32_t j = 0; j < n; ++j) {
                const bool has_next = j + 1 < n;
                if (has_next) wait_full(Ring::kK, j + 1);
                wait_full(Ring::kV, j);
                const bool zeroes = !has_next && partial_last_tile;
                if (zeroes && !zeroing_inside_turn) zero_last_tile(j);
                take_turn(j);
                if (zeroes && zeroing_inside_turn) zero_last_tile(j);
                program.push_back([this, c, g, j] {  // the turn's order: the other row group's turn before
                    Cta& x = cta[c];
                    if (g == 1) CHECK_MESSAGE(x.issued[0][j] == kWarpsPerGroup, "row group 1 issued before row group 0");
                    if (g == 0 && j > 0)
                        CHECK_MESSAGE(x.issued[1][j - 1] == kWarpsPerGroup, "row group 0 issued before row group 1");
                    ++x.issued[g][j];
                    return true;
                });
                if (has_next) read_start(Ring::kK, j + 1);
                read_start(Ring::kV, j);
                end_turn(j);
                if (has_next) {
                    read_end_and_release(Ring::kK, j + 1);
                    post(j + 1);
                    collect(j + 1);
                }
                read_end_and_release(Ring::kV, j);
            }
            actors.push_back(std::move(program));
            return;
        }
        if (n > 1) {
            wait_full(Ring::kK, 1);
            read_start(Ring::kK, 1);
        }
        for (int32_t j = 0; j < n; ++j) {
            const bool has_next = j + 1 < n, issue_next = j + 2 < n;
            if (has_next) read_end_and_release(Ring::kK, j + 1);
            wait_full(Ring::kV, j);
            if (issue_next) wait_full(Ring::kK, j + 2);
            if (!has_next && partial_last_tile) zero_last_tile(j);
            read_start(Ring::kV, j);
            if (has_next) {
                post(j + 1);
                collect(j + 1);
                if (issue_next) read_start(Ring::kK, j + 2);
            }
            read_end_and_release(Ring::kV, j);
        }
        actors.push_back(std::move(program));
    }

    // Random interleaving to the end; false on a deadlock.
    bool run(std::mt19937& rng) { return run_interleaving(actors, pc, in_flight, rng); }

    void check_idle() const {
        for (const Cta& c : cta) {
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < Traits::kKSlots; ++s) {
                    CHECK(c.full[r][s].idle());
                    CHECK(c.holders[r][s] == 0);
                }
            for (int g = 0; g < kGroups; ++g) {
                for (int p = 0; p < kParities; ++p) CHECK_MESSAGE(c.received[g][p].idle(), "an armed phase never completed");
                CHECK_MESSAGE(c.turn_arrived[g] == 0, "a turn granted and never taken, or taken and never granted");
            }
        }
    }
};

}  // namespace

namespace {

int32_t run_interleavings(bool ordered, uint32_t seed0) {
    std::mt19937 rng(seed0);
    int32_t runs = 0;
    for (int32_t n = 0; n <= 11; ++n)
        for (const bool partial : {false, true})
            for (int32_t seed = 0; seed < 60; ++seed) {
                CAPTURE(n);
                CAPTURE(partial);
                CAPTURE(seed);
                Model m;
                m.n = n;
                m.partial_last_tile = partial;
                m.ordered = ordered;
                m.init();
                REQUIRE_MESSAGE(m.run(rng), "deadlock");
                m.check_idle();
                ++runs;
            }
    return runs;
}

}  // namespace

TEST_CASE("wgmma_bf16c2_d512 protocol: every interleaving finishes and reads what it expects") {
    CHECK(run_interleavings(false, 20261204) == 12 * 2 * 60);
}

TEST_CASE("wgmma_bf16c2pp_d512 protocol: the ordered form's turns, every interleaving finishes") {
    CHECK(run_interleavings(true, 20261205) == 12 * 2 * 60);
}

TEST_CASE("wgmma_bf16c2pp_d512 protocol: the turns alternate and balance") {
    // Over a block of n steps: row group 0 waits n - 1 times and grants n times, row group 1 waits
    // n times and grants n - 1 times, so each barrier's waits equal its grants.
    for (int32_t n = 1; n <= 9; ++n) {
        int32_t waits[kGroups] = {}, grants[kGroups] = {};
        for (int32_t g = 0; g < kGroups; ++g)
            for (int32_t step = 0; step < n; ++step) {
                if (turn_waits(g, step)) ++waits[g];
                if (turn_grants(g, step, n)) ++grants[next_turn_group(g)];
            }
        CAPTURE(n);
        CHECK(waits[0] == grants[0]);
        CHECK(waits[1] == grants[1]);
        CHECK(waits[0] == n - 1);
        CHECK(waits[1] == n);
    }
    CHECK(next_turn_group(0) == 1);
    CHECK(next_turn_group(1) == 0);
}

TEST_CASE("wgmma_bf16c2pp_d512 protocol: the model sees a zeroing barrier inside a turn") {
    // The last tile's zeroing barrier, which both row groups meet, placed after the turn's wait
    // deadlocks: row group 0 would hold its last turn waiting for row group 1, whose last turn
    // needs row group 0's grant. The model must find it, or its finding the ordered form free of
    // deadlocks would mean nothing.
    std::mt19937 rng(11);
    Model m;
    m.n = 3;
    m.partial_last_tile = true;
    m.ordered = true;
    m.zeroing_inside_turn = true;
    m.init();
    CHECK_FALSE(m.run(rng));
}

TEST_CASE("wgmma_bf16c2_d512 protocol: the model sees a wrong phase and a missing arm") {
    // A received barrier armed for one phase fewer than the tiles need never completes the last
    // exchange: the model must report the deadlock, or it could not show the schedule is right.
    std::mt19937 rng(7);
    Model m;
    m.n = 3;
    m.init();
    m.cta[0].received[0][0].pending = 2;  // as if one arm of the first tiles' barrier were missing
    m.cta[0].received[0][0].expected = 2;
    CHECK_FALSE(m.run(rng));
    // And a ring whose full phase parity were off by one would let a read start on the previous
    // tile's slot contents: use_parity must advance exactly once per kSlots tiles.
    for (int32_t tile = 0; tile < 64; ++tile) {
        CHECK(use_parity<Traits::kKSlots>(tile) == static_cast<uint32_t>((tile / Traits::kKSlots) % 2));
        CHECK(exchange_phase<kParities>(tile) == static_cast<uint32_t>((tile / kParities) % 2));
    }
}
