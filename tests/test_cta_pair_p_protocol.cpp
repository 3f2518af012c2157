// test_cta_pair_p_protocol.cpp - a CPU model of the synchronisation protocol of wgmma_bf16c2p_d512
// (kernels/hopper/bf16c2p_d512): per CTA the two K producers and the V producer filling their
// rings, the home warps (scores of the CTA's row group: K and V reads, the P messages posted to the
// partner after waiting for the tokens that free their buffer, the final row statistics), the fed
// warps (V reads, the partner's messages read, the tokens sent back, the final statistics waited
// for), the last tile's barrier of both warpgroups; the copies, messages and tokens landing at
// random later points under random interleavings. The model reads the kernel's constants
// (traits.h) and the schedule rules it shares with wgmma_bf16c2_d512 (schedule.h); the warps'
// sequences are written here after mainloop.cuh and exchange.cuh. Every run must finish, every
// read must find the tile or message it expects, no copy or message may land where a reader still
// needs the previous contents, and every barrier must end with no phase half done.
#include <doctest/doctest.h>

#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "kernels/hopper/bf16c2p_d512/traits.h"
#include "tests/cta_pair_model.h"

using namespace wideattn;
using namespace wideattn::hopper::bf16c2;
using namespace wideattn::cta_pair_model;

namespace {

using Traits = WgmmaBf16C2pD512Traits;
constexpr int32_t kCtas = Traits::kClusterCtas;
constexpr int32_t kWarps = Traits::kGroupWarps;        // a consumer warpgroup's warps
constexpr int32_t kBuffers = Traits::kMessageParities;
constexpr int64_t kWarpMessageBytes = Traits::kMessageBytes / kWarps;  // a warp's 32 threads' st.async
constexpr int64_t kWarpStateBytes = Traits::kStateBytes / kWarps;

enum Ring { kK = 0, kV = 1 };

struct Cta {
    MBarrier full[2][Traits::kKSlots], empty[2][Traits::kKSlots];
    MBarrier received[kBuffers], freed[kBuffers], state;
    int32_t slot_pieces[2][Traits::kKSlots];  // copies of the slot's current tile landed
    int32_t slot_tile[2][Traits::kKSlots];    // the tile being copied into the slot (-1: none)
    int32_t holders[2][Traits::kKSlots];      // warps whose wgmmas may still read the slot
    int32_t buffer_tile[kBuffers];            // the message the receive buffer holds (-1: none)
    int32_t buffer_pieces[kBuffers];          // warps' pieces of it landed
    int32_t buffer_readers[kBuffers];         // fed warps that have read it
    int32_t state_pieces = 0;
    int32_t consumers_arrived = 0, consumers_generation = 0;  // the last tile's barrier, 8 warps
};
static_assert(Traits::kKSlots == Traits::kVSlots, "the model indexes both rings alike");

struct Model {
    int32_t n = 0;
    bool partial_last_tile = false;
    bool skip_token_wait = false;  // a mutation: posts without waiting for the buffer's tokens
    Cta cta[kCtas];
    std::vector<std::vector<Step>> actors;
    std::vector<size_t> pc;
    std::vector<std::function<void()>> in_flight;  // copies, messages and tokens not landed yet
    std::vector<std::string> violations;

    void expect(bool ok, const char* what) {
        if (!ok) violations.emplace_back(what);
    }

    void init() {
        for (Cta& c : cta) {
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < Traits::kKSlots; ++s) {
                    c.full[r][s].init(r == kK ? Traits::kKProducers : 1);
                    c.empty[r][s].init(r == kK ? kWarps : Traits::kConsumerWarps);
                    c.slot_tile[r][s] = -1;
                    c.slot_pieces[r][s] = 0;
                    c.holders[r][s] = 0;
                }
            for (int b = 0; b < kBuffers; ++b) {
                c.received[b].init(1);
                c.freed[b].init(1);
                c.buffer_tile[b] = -1;
                c.buffer_pieces[b] = 0;
                c.buffer_readers[b] = 0;
                if (armed_at_start<kBuffers>(b, n)) {
                    c.received[b].arrive(Traits::kMessageBytes);
                    c.freed[b].arrive(Traits::kFreedBytes);
                }
            }
            c.state.init(1);
            c.state.arrive(Traits::kStateBytes);
        }
        for (int c = 0; c < kCtas; ++c) {
            for (int k = 0; k < Traits::kKProducers; ++k) add_producer(c, kK);
            add_producer(c, kV);
            for (int w = 0; w < kWarps; ++w) add_home_warp(c, w);
            for (int w = 0; w < kWarps; ++w) add_fed_warp(c, w);
        }
        pc.assign(actors.size(), 0);
    }

    // One producer thread's ring: each tile waits for the slot's release, then its copy (one of
    // the slot's kKProducers for K) lands later.
    void add_producer(int c, Ring r) {
        std::vector<Step> program;
        const int32_t copies = r == kK ? Traits::kKProducers : 1;
        for (int32_t tile = 0; tile < n; ++tile) {
            const int s = tile % Traits::kKSlots;
            if (refill_waits<Traits::kKSlots>(tile)) {
                const uint32_t parity = use_parity<Traits::kKSlots>(tile - Traits::kKSlots);
                program.push_back([this, c, r, s, parity] { return cta[c].empty[r][s].passed(parity); });
            }
            program.push_back([this, c, r, s, tile, copies] {
                Cta& x = cta[c];
                expect(x.holders[r][s] == 0, "a copy into a slot that a warp still reads");
                x.full[r][s].arrive(Traits::kChunkBytes);
                in_flight.push_back([this, c, r, s, tile, copies] {
                    Cta& y = cta[c];
                    expect(y.holders[r][s] == 0, "a copy landed in a slot that a warp still reads");
                    if (y.slot_tile[r][s] != tile) {
                        y.slot_tile[r][s] = tile;
                        y.slot_pieces[r][s] = 0;
                    }
                    ++y.slot_pieces[r][s];
                    expect(y.slot_pieces[r][s] <= copies, "more copies than a tile has");
                    y.full[r][s].complete_tx(Traits::kChunkBytes);
                });
                return true;
            });
        }
        actors.push_back(std::move(program));
    }

    void wait_full(std::vector<Step>& program, int c, Ring r, int32_t tile) {
        const int s = tile % Traits::kKSlots;
        const uint32_t parity = use_parity<Traits::kKSlots>(tile);
        program.push_back([this, c, r, s, parity] { return cta[c].full[r][s].passed(parity); });
    }
    void read_start(std::vector<Step>& program, int c, Ring r, int32_t tile) {  // a wgmma issued on the slot
        const int s = tile % Traits::kKSlots;
        program.push_back([this, c, r, s, tile] {
            const Cta& x = cta[c];
            expect(x.slot_tile[r][s] == tile && x.slot_pieces[r][s] == (r == kK ? Traits::kKProducers : 1),
                   "a wgmma reads a slot that does not hold its whole tile");
            ++cta[c].holders[r][s];
            return true;
        });
    }
    void read_end_and_release(std::vector<Step>& program, int c, Ring r, int32_t tile) {
        const int s = tile % Traits::kKSlots;
        program.push_back([this, c, r, s, tile] {
            expect(cta[c].slot_tile[r][s] == tile, "a slot changed under its reader");
            --cta[c].holders[r][s];
            cta[c].empty[r][s].arrive();
            return true;
        });
    }
    void consumers_barrier(std::vector<Step>& program, int c) {
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
    }
    void zero_last_tile(std::vector<Step>& program, int c, int32_t j) {
        const int s = j % Traits::kVSlots;
        program.push_back([this, c, s, j] {
            expect(cta[c].slot_tile[kV][s] == j, "the zeroing stores into another tile");
            return true;
        });
        consumers_barrier(program, c);
    }

    // post_probs: the wait for the buffer's tokens of tile - kBuffers and the re-arm (thread 0, warp
    // 0), then the warp's piece of the message, landing later in the partner's buffer.
    void post(std::vector<Step>& program, int c, int w, int32_t tile) {
        const int b = exchange_parity<kBuffers>(tile);
        if (tile >= kBuffers && !skip_token_wait) {
            const uint32_t phase = exchange_phase<kBuffers>(tile - kBuffers);
            program.push_back([this, c, b, phase] { return cta[c].freed[b].passed(phase); });
            if (w == 0)
                program.push_back([this, c, b] {
                    cta[c].freed[b].arrive(Traits::kFreedBytes);
                    return true;
                });
        }
        program.push_back([this, c, b, tile] {
            const int partner = 1 - c;
            in_flight.push_back([this, partner, b, tile] {
                Cta& y = cta[partner];
                if (y.buffer_tile[b] != tile) {
                    expect(y.buffer_tile[b] == -1 || y.buffer_readers[b] == kWarps,
                           "a message stored over one the fed warps have not read");
                    expect(y.buffer_tile[b] == -1 || y.buffer_tile[b] == tile - kBuffers, "messages out of order");
                    y.buffer_tile[b] = tile;
                    y.buffer_pieces[b] = 0;
                    y.buffer_readers[b] = 0;
                }
                ++y.buffer_pieces[b];
                y.received[b].complete_tx(kWarpMessageBytes);
            });
            return true;
        });
    }

    // The home warp w of CTA c, in home_mainloop's order.
    void add_home_warp(int c, int w) {
        std::vector<Step> program;
        if (n > 0) {
            wait_full(program, c, kK, 0);
            read_start(program, c, kK, 0);
            read_end_and_release(program, c, kK, 0);
            post(program, c, w, 0);
        }
        if (n > 1) {
            wait_full(program, c, kK, 1);
            read_start(program, c, kK, 1);
        }
        for (int32_t j = 0; j < n; ++j) {
            const bool has_next = j + 1 < n, issue_next = j + 2 < n;
            if (has_next) read_end_and_release(program, c, kK, j + 1);
            wait_full(program, c, kV, j);
            if (issue_next) wait_full(program, c, kK, j + 2);
            if (!has_next && partial_last_tile) zero_last_tile(program, c, j);
            read_start(program, c, kV, j);
            if (issue_next) read_start(program, c, kK, j + 2);
            if (has_next) post(program, c, w, j + 1);
            read_end_and_release(program, c, kV, j);
        }
        program.push_back([this, c] {  // post_state: the warp's rows' statistics to the partner
            const int partner = 1 - c;
            in_flight.push_back([this, partner] {
                ++cta[partner].state_pieces;
                cta[partner].state.complete_tx(kWarpStateBytes);
            });
            return true;
        });
        actors.push_back(std::move(program));
    }

    // The fed warp w of CTA c, in fed_mainloop's order.
    void add_fed_warp(int c, int w) {
        std::vector<Step> program;
        for (int32_t j = 0; j < n; ++j) {
            if (j > 0) read_end_and_release(program, c, kV, j - 1);
            const int b = exchange_parity<kBuffers>(j);
            const uint32_t phase = exchange_phase<kBuffers>(j);
            const bool rearm = rearm_after<kBuffers>(j, n) && w == 0;
            program.push_back([this, c, b, phase] { return cta[c].received[b].passed(phase); });
            program.push_back([this, c, b, j, rearm] {  // receive_probs: read, re-arm, token
                Cta& x = cta[c];
                expect(x.buffer_tile[b] == j && x.buffer_pieces[b] == kWarps, "a message read before it landed");
                ++x.buffer_readers[b];
                if (rearm) x.received[b].arrive(Traits::kMessageBytes);
                const int partner = 1 - c;
                in_flight.push_back([this, partner, b] { cta[partner].freed[b].complete_tx(Traits::kTokenBytes); });
                return true;
            });
            wait_full(program, c, kV, j);
            if (j + 1 == n && partial_last_tile) zero_last_tile(program, c, j);
            read_start(program, c, kV, j);
        }
        if (n > 0) read_end_and_release(program, c, kV, n - 1);
        program.push_back([this, c] { return cta[c].state.passed(0); });  // receive_state
        program.push_back([this, c] {
            expect(cta[c].state_pieces == kWarps, "row statistics read before they landed");
            return true;
        });
        actors.push_back(std::move(program));
    }

    // Random interleaving to the end; false on a deadlock.
    bool run(std::mt19937& rng) { return run_interleaving(actors, pc, in_flight, rng); }

    void check_idle() {
        for (const Cta& c : cta) {
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < Traits::kKSlots; ++s) {
                    expect(c.full[r][s].idle(), "a ring phase left half done");
                    expect(c.holders[r][s] == 0, "a slot still held at the end");
                }
            for (int b = 0; b < kBuffers; ++b) {
                expect(c.received[b].idle(), "an armed message phase never completed");
                expect(c.freed[b].idle(), "an armed token phase never completed");
            }
            expect(c.state.idle(), "the row statistics' phase never completed");
            expect(c.consumers_arrived == 0, "the last tile's barrier left half met");
        }
    }
};

}  // namespace

TEST_CASE("wgmma_bf16c2p_d512 protocol: every interleaving finishes and reads what it expects") {
    std::mt19937 rng(20261206);
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
                m.init();
                REQUIRE_MESSAGE(m.run(rng), "deadlock");
                m.check_idle();
                CHECK_MESSAGE(m.violations.empty(), (m.violations.empty() ? std::string() : m.violations.front()));
                ++runs;
            }
    CHECK(runs == 12 * 2 * 60);
}

TEST_CASE("wgmma_bf16c2p_d512 protocol: the model sees a message stored over an unread one") {
    // Without the wait for the buffer's tokens a home warp may post tile t + 2 before the partner's
    // fed warps have read tile t from that buffer: the model must report it in some interleaving,
    // or its finding the kernel's order free of overwrites would mean nothing.
    std::mt19937 rng(5);
    int32_t caught = 0;
    for (int32_t seed = 0; seed < 200 && caught == 0; ++seed) {
        Model m;
        m.n = 8;
        m.skip_token_wait = true;
        m.init();
        m.run(rng);
        for (const std::string& v : m.violations)
            if (v == "a message stored over one the fed warps have not read") ++caught;
    }
    CHECK(caught > 0);
}

TEST_CASE("wgmma_bf16c2p_d512 protocol: a missing arm of the token barrier deadlocks in the model") {
    std::mt19937 rng(9);
    Model m;
    m.n = 5;
    m.init();
    m.cta[1].freed[0].pending = 2;  // as if the start's arm of buffer 0 were missing
    m.cta[1].freed[0].expected = 2;
    CHECK_FALSE(m.run(rng));
}
