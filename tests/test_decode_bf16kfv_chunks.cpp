// test_decode_bf16kfv_chunks.cpp - which dims the V chunks of decode_bf16kfv_d512 hold
// (kernels/decode_bf16kfv_d512/traits.h: chunk_part_bytes, chunk_lane_bytes, o_tile) and how its
// score k-steps read them (keys.cuh): every dim in exactly one vector, each chunk holding whole
// RoPE pairs (the partner of a first-half lane's dims in the lane 16 further of the same chunk),
// the chunk's O^T m-tiles mapped onto the block's, and the K + V block's two contiguous halves
// unchanged.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/decode_bf16kfv_d512/traits.h"

using namespace wideattn;

namespace {

// The first dim of the 16-byte vector that lane `lane` copies into a chunk of part `part`.
template <class Traits>
int32_t lane_dim(int32_t part, int32_t lane) {
    return (Traits::chunk_part_bytes(part) + Traits::chunk_lane_bytes(lane)) / Traits::kElemBytes;
}

// Every dim of a key row is copied by exactly one (part, lane), and the chunk's m-tile c (its
// vectors 2c, 2c + 1) is the block's m-tile o_tile(part, c), each block m-tile once.
template <class Traits>
void check_covering() {
    constexpr int32_t kDimsPerVec = Traits::kVecBytes / Traits::kElemBytes;
    std::vector<int> dims(Traits::kHeadDim, 0), tiles(Traits::kONTiles, 0);
    for (int32_t part = 0; part < Traits::kChunkParts; ++part) {
        for (int32_t lane = 0; lane < Traits::kVecsPerChunkRow; ++lane) {
            const int32_t d = lane_dim<Traits>(part, lane);
            REQUIRE(d >= 0);
            REQUIRE(d + kDimsPerVec <= Traits::kHeadDim);
            CHECK(d % kDimsPerVec == 0);
            for (int32_t e = 0; e < kDimsPerVec; ++e) ++dims[d + e];
        }
        for (int32_t c = 0; c < Traits::kChunkOTiles; ++c) {
            const int32_t tile = Traits::o_tile(part, c);
            REQUIRE(tile >= 0);
            REQUIRE(tile < Traits::kONTiles);
            ++tiles[tile];
            CHECK(lane_dim<Traits>(part, 2 * c) == Traits::kMmaM * tile);
            CHECK(lane_dim<Traits>(part, 2 * c + 1) == Traits::kMmaM * tile + kDimsPerVec);
        }
    }
    for (int32_t d = 0; d < Traits::kHeadDim; ++d) CHECK_MESSAGE(dims[d] == 1, "dim " << d);
    for (int32_t t = 0; t < Traits::kONTiles; ++t) CHECK_MESSAGE(tiles[t] == 1, "m-tile " << t);
}

}  // namespace

TEST_CASE("decode_bf16kfv_d512: each V chunk holds whole RoPE pairs, every dim once") {
    using Traits = DecodeBf16KfvD512Traits;
    check_covering<Traits>();
    for (int32_t part = 0; part < Traits::kChunkParts; ++part)
        for (int32_t lane = 0; lane < Traits::kLanesPerHalf; ++lane) {
            const int32_t d = lane_dim<Traits>(part, lane);
            CHECK(d < Traits::kHalfDim);  // a first dim ...
            CHECK(lane_dim<Traits>(part, lane + Traits::kLanesPerHalf) == d + Traits::kHalfDim);  // ... its partner
        }
    // Gemma 4's rotated dims (rotary_dims 128: first dims 0-63) are all in part 0.
    for (int32_t lane = 0; lane < Traits::kVecsPerChunkRow; ++lane) {
        const int32_t d = lane_dim<Traits>(1, lane) % Traits::kHalfDim;
        CHECK(d >= 64);
    }
}

TEST_CASE("decode_bf16kfv_d512: a Q load's k-steps read the chunk vectors of its dims and their partners") {
    using Traits = DecodeBf16KfvD512Traits;
    constexpr int32_t kStepVecs = Traits::kMmaK * Traits::kElemBytes / Traits::kVecBytes;
    for (int32_t q = 0; q < Traits::kQLoadsPerChunk; ++q)
        for (int32_t h = 0; h < Traits::kKStepsPerQLoad; ++h) {
            // keys.cuh, kfv_scores_q: the part, the global first-dim k-step and the chunk's k-step.
            const int32_t part = q / Traits::kQLoadsPerPart;
            const int32_t step = Traits::kKStepsPerQLoad * q + h;
            const int32_t local = Traits::kKStepsPerQLoad * (q % Traits::kQLoadsPerPart) + h;
            // chunk_row_address reads vectors 2c, 2c + 1 of k-step c.
            CHECK(lane_dim<Traits>(part, kStepVecs * local) == Traits::kMmaK * step);
            CHECK(lane_dim<Traits>(part, kStepVecs * (local + Traits::kPartnerSteps)) ==
                  Traits::kMmaK * step + Traits::kHalfDim);
        }
}

TEST_CASE("decode_bf16_d512, decode_bf16w4_d512: the K + V chunks are the two contiguous halves") {
    check_covering<DecodeBf16D512Traits>();
    check_covering<DecodeBf16W4D512Traits>();
    for (int32_t part = 0; part < DecodeBf16D512Traits::kChunkParts; ++part)
        for (int32_t lane = 0; lane < DecodeBf16D512Traits::kVecsPerChunkRow; ++lane)
            CHECK(lane_dim<DecodeBf16D512Traits>(part, lane) == part * DecodeBf16D512Traits::kChunkDims + 8 * lane);
}
