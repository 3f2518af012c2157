// test_decode_kfvw12_layout.cpp - the layout decode_bf16kfvw12_d512 (kernels/decode_bf16kfvw12_d512/)
// builds on, checked on the host: the two warps of a pair hold every head dim once, each with both
// dims of its RoPE pairs; a warp's slot holds the 16-byte vectors its score k-steps and O m-tiles
// read (o_tile, global_vec); the rotated k-steps of each warp are a prefix of its local steps and
// together exactly the k-steps below rotary_dims / 2 (rotated_local_steps); the shared-memory plan's
// regions are disjoint and fit.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "kernels/decode_bf16kfvw12_d512/traits.h"

using namespace wideattn;

namespace {

using T = DecodeBf16KfvW12D512Traits;

// The dims of global k-step (or O m-tile) n: 16 n .. 16 n + 15.
std::vector<int32_t> tile_dims(int32_t n) {
    std::vector<int32_t> dims;
    for (int32_t d = 0; d < T::kMmaK; ++d) dims.push_back(T::kMmaK * n + d);
    return dims;
}

}  // namespace

TEST_CASE("decode_bf16kfvw12_d512: the warps of a pair hold every dim once, with both dims of their RoPE pairs") {
    std::multiset<int32_t> all;
    for (int32_t rank = 0; rank < T::kDimSplit; ++rank) {
        std::set<int32_t> own;
        for (int32_t c = 0; c < T::kONTiles; ++c)
            for (int32_t d : tile_dims(T::o_tile(c, rank))) {
                own.insert(d);
                all.insert(d);
            }
        CHECK(own.size() == static_cast<size_t>(T::kHeadDim / T::kDimSplit));
        for (int32_t d : own) {
            CAPTURE(rank);
            CAPTURE(d);
            CHECK(own.count(d < T::kHalfDim ? d + T::kHalfDim : d - T::kHalfDim) == 1);
        }
    }
    CHECK(all.size() == static_cast<size_t>(T::kHeadDim));
    for (int32_t d = 0; d < T::kHeadDim; ++d) CHECK(all.count(d) == 1);
}

TEST_CASE("decode_bf16kfvw12_d512: a warp's score k-steps and O m-tiles read the vectors its lanes copied") {
    for (int32_t rank = 0; rank < T::kDimSplit; ++rank) {
        CAPTURE(rank);
        std::set<int32_t> copied;
        for (int32_t lane = 0; lane < T::kWarpSize; ++lane) {
            const int32_t v = T::global_vec(lane, rank);
            CHECK(v >= 0);
            CHECK(v < T::kHeadDim * T::kElemBytes / T::kVecBytes);
            copied.insert(v);
        }
        CHECK(copied.size() == static_cast<size_t>(T::kWarpSize));
        for (int32_t ls = 0; ls < T::kWarpSteps; ++ls) {
            const int32_t step = T::kDimSplit * ls + rank;  // keys.cuh's global k-step of local step ls
            // The ldmatrix of the low half reads local vectors 2 ls, 2 ls + 1, the high half's
            // 2 (kWarpSteps + ls) and + 1 (chunk_row_address): the dims of the step in each half.
            for (int32_t h = 0; h < 2; ++h) {
                const int32_t c = h * T::kWarpSteps + ls;
                CHECK(T::o_tile(c, rank) == h * T::kHalfKSteps + step);
                CHECK(T::global_vec(2 * c, rank) == 2 * (h * T::kHalfKSteps + step));
                CHECK(T::global_vec(2 * c + 1, rank) == 2 * (h * T::kHalfKSteps + step) + 1);
            }
        }
    }
}

TEST_CASE("decode_bf16kfvw12_d512: each warp's rotated k-steps are a prefix, together those below rotary_dims / 2") {
    for (int32_t rotary_dims = 4; rotary_dims <= T::kHeadDim; rotary_dims += 4) {
        CAPTURE(rotary_dims);
        int32_t rotated_total = 0;
        for (int32_t rank = 0; rank < T::kDimSplit; ++rank) {
            const int32_t rotated = T::rotated_local_steps(rotary_dims, rank);
            rotated_total += rotated;
            for (int32_t ls = 0; ls < T::kWarpSteps; ++ls) {
                const int32_t first_dim = T::kMmaK * (T::kDimSplit * ls + rank);
                // The step holds a rotating dim exactly when it is in the prefix.
                CHECK((first_dim < rotary_dims / 2) == (ls < rotated));
            }
        }
        CHECK(rotated_total == (rotary_dims / 2 + T::kMmaK - 1) / T::kMmaK);
    }
    CHECK(T::rotated_local_steps(128, 0) == 2);  // Gemma 4's global layers: 4 rotated k-steps, 2 a warp
    CHECK(T::rotated_local_steps(128, 1) == 2);
    CHECK(T::rotated_local_steps(0, 0) == 0);
}

TEST_CASE("decode_bf16kfvw12_d512: the shared-memory plan") {
    using P = T::SmemPlan;
    CHECK(P::kRings == T::kQBytes);
    CHECK(P::kExchange == P::kRings + T::kWarps * T::kWarpRingBytes);
    CHECK(P::kStats == P::kExchange + T::kExchangeBytes);
    CHECK(P::kWeight == P::kStats + T::kStatsBytes);
    CHECK(P::kEnd == P::kWeightBf16 + T::kWeightBf16Bytes);
    CHECK(P::kMerge + T::kMergeBytes <= P::kExchange);  // the merge area lies in the rings
    CHECK(T::kSmemBytes <= kSmemLimitSm90);
    CHECK(T::kThreads == 384);
    CHECK(T::kWarps * T::kRingSlots * T::kChunkBytes >= 64 * 1024);  // bytes a block keeps in flight or reads
}
