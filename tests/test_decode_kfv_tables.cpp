// test_decode_kfv_tables.cpp - the packed k_norm weight table of decode_bf16kfv2_d512 (the lean
// table reads, kernels/decode_bf16kfv_d512/traits.h packed_weight_offset): the block stages the
// pair of dims (d, d + 1) at packed_weight_offset(d), and build_k_step reads a k-step's four pairs
// with one 16-byte load at packed_load_offset(step, t), taking them as (first dims of
// half 0, their partners, first dims of half 1, their partners). Every pair must land in its own
// 4-byte word of the table, and each lane's load must find exactly the pairs of its dims.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/decode_bf16kfv2_d512/traits.h"

using namespace wideattn;

namespace {

using Traits = DecodeBf16Kfv2D512Traits;

}  // namespace

TEST_CASE("decode_bf16kfv2_d512 packed weights: every pair of dims in its own word of the bf16 table") {
    static_assert(Traits::kLeanTables, "the candidate reads the packed table");
    std::vector<int32_t> owner(Traits::kWeightBf16Bytes / Traits::kPairBytes, -1);
    for (int32_t d = 0; d < Traits::kHeadDim; d += 2) {
        const int32_t offset = Traits::packed_weight_offset(d);
        CAPTURE(d);
        REQUIRE(offset >= 0);
        REQUIRE(offset + Traits::kPairBytes <= Traits::kWeightBf16Bytes);
        CHECK(offset % Traits::kPairBytes == 0);
        CHECK(owner[offset / Traits::kPairBytes] == -1);
        owner[offset / Traits::kPairBytes] = d;
    }
    for (int32_t word : owner) CHECK(word != -1);
}

TEST_CASE("decode_bf16kfv2_d512 packed weights: a lane's 16-byte load holds the pairs build_k_step uses") {
    // build_k_step's dims for k-step `step` and lane quad place t: half h, dims d = kMmaK step +
    // kMmaK / 2 h + 2 t (the A fragment's first registers) and d + kHalfDim (the RoPE partners).
    for (int32_t step = 0; step < Traits::kChunkKSteps; ++step)
        for (int32_t t = 0; t < Traits::kQuadPositions; ++t) {
            const int32_t load = Traits::packed_load_offset(step, t);
            CAPTURE(step);
            CAPTURE(t);
            CHECK(load == Traits::packed_weight_offset(Traits::kMmaK * step + 2 * t));
            CHECK(load % Traits::kPackedWeightBytes == 0);  // a 16-byte aligned load
            for (int32_t half = 0; half < 2; ++half) {
                const int32_t d = Traits::kMmaK * step + Traits::kMmaK / 2 * half + 2 * t;
                CHECK(Traits::packed_weight_offset(d) == load + (2 * half) * Traits::kPairBytes);
                CHECK(Traits::packed_weight_offset(d + Traits::kHalfDim) == load + (2 * half + 1) * Traits::kPairBytes);
            }
        }
}
