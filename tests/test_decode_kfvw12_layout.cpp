// test_decode_kfvw12_layout.cpp - the layout the K-from-V decode blocks whose warps share sub-tiles
// (decode_bf16kfvw12_d512: two warps a sub-tile, decode_bf16kfvw16_d512: four;
// kernels/decode_bf16kfvw12_d512/) build on, checked on the host for both: the warps of a set hold
// every head dim once, each with both dims of its RoPE pairs; a warp's slot holds the 16-byte vectors
// its score k-steps and O m-tiles read (o_tile, global_vec) and its lanes' copies cover every
// (key, vector) of the slot once; the rotated k-steps of each warp are a prefix of its local steps and
// together exactly the k-steps below rotary_dims / 2 (rotated_local_steps); the shared-memory plan's
// regions are disjoint and fit.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "kernels/decode_bf16kfvw12_d512/traits.h"
#include "kernels/decode_bf16kfvw16_d512/traits.h"

using namespace wideattn;

namespace {

// The dims of global k-step (or O m-tile) n: 16 n .. 16 n + 15.
template <class T>
std::vector<int32_t> tile_dims(int32_t n) {
    std::vector<int32_t> dims;
    for (int32_t d = 0; d < T::kMmaK; ++d) dims.push_back(T::kMmaK * n + d);
    return dims;
}

}  // namespace

#define KFVW_TRAITS DecodeBf16KfvW12D512Traits, DecodeBf16KfvW16D512Traits

TEST_CASE_TEMPLATE("decode_bf16kfvw12_d512 / w16: the warps of a set hold every dim once, with both dims of their RoPE pairs", T,
                   KFVW_TRAITS) {
    std::multiset<int32_t> all;
    for (int32_t rank = 0; rank < T::kDimSplit; ++rank) {
        std::set<int32_t> own;
        for (int32_t c = 0; c < T::kONTiles; ++c)
            for (int32_t d : tile_dims<T>(T::o_tile(c, rank))) {
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

TEST_CASE_TEMPLATE("decode_bf16kfvw12_d512 / w16: a warp's score k-steps and O m-tiles read the vectors its lanes copied", T,
                   KFVW_TRAITS) {
    for (int32_t rank = 0; rank < T::kDimSplit; ++rank) {
        CAPTURE(rank);
        std::set<int32_t> copied;
        for (int32_t v = 0; v < T::kVecsPerChunkRow; ++v) {
            const int32_t g = T::global_vec(v, rank);
            CHECK(g >= 0);
            CHECK(g < T::kHeadDim * T::kElemBytes / T::kVecBytes);
            copied.insert(g);
        }
        CHECK(copied.size() == static_cast<size_t>(T::kVecsPerChunkRow));
        // block.cuh's copy: lane l takes local vector l % kVecsPerChunkRow of keys l / kVecsPerChunkRow,
        // + kKeysPerCopy, ...: every (key, vector) of the slot once.
        std::multiset<std::pair<int32_t, int32_t>> slots;
        for (int32_t lane = 0; lane < T::kWarpSize; ++lane)
            for (int32_t key = lane / T::kVecsPerChunkRow; key < T::kSubTileKeys; key += T::kKeysPerCopy)
                slots.insert({key, lane % T::kVecsPerChunkRow});
        CHECK(slots.size() == static_cast<size_t>(T::kSubTileKeys * T::kVecsPerChunkRow));
        for (const auto& slot : slots) CHECK(slots.count(slot) == 1);
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

TEST_CASE_TEMPLATE("decode_bf16kfvw12_d512 / w16: each warp's rotated k-steps are a prefix, together those below rotary_dims / 2",
                   T, KFVW_TRAITS) {
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
    // Gemma 4's global layers: 4 rotated k-steps, 4 / kDimSplit a warp, whose table words go ahead.
    for (int32_t rank = 0; rank < T::kDimSplit; ++rank) CHECK(T::rotated_local_steps(128, rank) == 4 / T::kDimSplit);
    CHECK(T::kCosSinStepsAhead == 4 / T::kDimSplit);
    CHECK(T::rotated_local_steps(0, 0) == 0);
}

TEST_CASE_TEMPLATE("decode_bf16kfvw12_d512 / w16: the shared-memory plan", T, KFVW_TRAITS) {
    using P = typename T::SmemPlan;
    CHECK(P::kRings == T::kQBytes);
    CHECK(P::kExchange == P::kRings + T::kWarps * T::kWarpRingBytes);
    CHECK(P::kStats == P::kExchange + T::kExchangeBytes);
    CHECK(P::kWeight == P::kStats + T::kStatsBytes);
    CHECK(P::kEnd == P::kWeightBf16 + T::kWeightBf16Bytes);
    CHECK(P::kMerge + T::kMergeBytes <= P::kExchange);  // the merge area lies in the rings
    CHECK(T::kSmemBytes <= kSmemLimitSm90);
    CHECK(T::kThreads == T::kSets * T::kDimSplit * T::kWarpSize);
    CHECK(T::kThreads <= 512);  // __launch_bounds__(kThreads, 1): at least 128 registers a thread
    CHECK(T::kWarps * T::kRingSlots * T::kChunkBytes >= 64 * 1024);  // bytes a block keeps in flight or reads
}
