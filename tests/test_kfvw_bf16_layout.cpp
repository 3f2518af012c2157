// test_kfvw_bf16_layout.cpp - decode_bf16kfvw_d512's shared-memory layouts against the wgmma
// descriptors that read them, on the CPU (kernels/decode_bf16kfvw_d512/layout.h): the V stage and
// the Q' tile under the score steps (128-byte swizzle, K-major), the same stage under the P V
// steps' transposed V^T descriptor (128-byte swizzle, MN-major), the P^T tile under the P V steps'
// B descriptor (K-major without swizzle), the cp.async copy plan (every vector of a tile once),
// the rotated score blocks against the Q loads, and the two-term bf16 split of Q' (x = hi + lo to
// 2^-16 of |x|, where one term alone is off by up to 2^-8 of |x|).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>

#include "kernels/common/k_from_v.h"
#include "kernels/common/wgmma_layout.h"
#include "kernels/decode_bf16kfvw_d512/layout.h"
#include "kernels/decode_bf16kfvw_d512/traits.h"

using namespace wideattn;
using namespace wideattn::hopper;
using Bt = DecodeBf16KfvWD512Traits;

namespace {

constexpr uint32_t kBase = 0x400;  // a 1024-byte aligned shared address
constexpr int32_t kAtomRowBytes = 128;
constexpr int32_t kCoreRows = 8;
constexpr int32_t kCoreRowBytes = 16;
constexpr int32_t kBf16 = 2;

uint32_t field(uint32_t word, int shift) { return ((word >> shift) & kDescFieldMask) << kDescUnitShift; }

// PTX ISA 128-byte swizzle: address bits [4:6] ^= bits [7:9].
uint32_t swizzled(uint32_t address) { return address ^ (((address >> 7) & 7u) << 4); }

// Byte k of row m of a K-major operand with 128-byte swizzle.
uint32_t k_major_address(SmemDescriptor d, int32_t m, int32_t k) {
    const uint32_t start = field(d.low, 0), stride = field(d.high, 0);
    return swizzled(start + (m / 8) * stride + (m % 8) * kAtomRowBytes + k);
}

// Element (m, k) of an MN-major 16-bit operand with 128-byte swizzle: 64-element blocks along m
// LBO apart, 8-row groups along k SBO apart, rows 128 bytes apart; then the swizzle.
uint32_t mn_major_address(SmemDescriptor d, int32_t m, int32_t k) {
    const uint32_t start = field(d.low, 0), leading = field(d.low, kDescLeadingShift), stride = field(d.high, 0);
    constexpr int32_t kBlock = 64;
    return swizzled(start + (m / kBlock) * leading + (m % kBlock) * kBf16 + (k / 8) * stride + (k % 8) * kAtomRowBytes);
}

// Element (n, k) of a K-major 16-bit operand without swizzle.
uint32_t interleaved_k_major_address(SmemDescriptor d, int32_t n, int32_t k) {
    const uint32_t start = field(d.low, 0), leading = field(d.low, kDescLeadingShift), stride = field(d.high, 0);
    const int32_t byte = k * kBf16;
    return start + (n / kCoreRows) * stride + (n % kCoreRows) * kCoreRowBytes + (byte / kCoreRowBytes) * leading +
           byte % kCoreRowBytes;
}

// Where the loaders put dim `dim` of key (or Q' row) `row`.
uint32_t stage_address(uint32_t stage, int32_t key, int32_t dim) {
    return stage + kfvw_bf16::stage_offset(key, dim * kBf16 / Bt::kVecBytes) + (dim * kBf16) % Bt::kVecBytes;
}
uint32_t fold_address(uint32_t fold, int32_t row, int32_t dim) {
    return fold + kfvw_bf16::fold_offset(row, dim * kBf16 / Bt::kVecBytes) + (dim * kBf16) % Bt::kVecBytes;
}

}  // namespace

TEST_CASE("kfvw bf16 layout: the V stage and Q' are where the score steps read them") {
    std::set<uint32_t> slots;
    for (int32_t key = 0; key < Bt::kTileKeysW; ++key)
        for (int32_t vec = 0; vec < Bt::kVecsPerRow; ++vec) slots.insert(kfvw_bf16::stage_offset(key, vec));
    CHECK(slots.size() == static_cast<size_t>(Bt::kTileKeysW * Bt::kVecsPerRow));
    CHECK(*slots.rbegin() + Bt::kVecBytes == static_cast<uint32_t>(Bt::kStageBytes));
    std::set<uint32_t> fold_slots;
    for (int32_t row = 0; row < Bt::kTermColumns; ++row)
        for (int32_t vec = 0; vec < Bt::kVecsPerRow; ++vec) fold_slots.insert(kfvw_bf16::fold_offset(row, vec));
    CHECK(fold_slots.size() == static_cast<size_t>(Bt::kTermColumns * Bt::kVecsPerRow));
    CHECK(*fold_slots.rbegin() + Bt::kVecBytes == static_cast<uint32_t>(Bt::kFoldBytes));

    const uint32_t stage = kBase, fold = kBase + Bt::kStageBytes;
    int64_t wrong = 0, checked = 0;
    for (int32_t block = 0; block < Bt::kScoreSteps; ++block) {
        const FoldScoreStep step = fold_score_step<Bt>(stage, fold, block);
        CHECK((step.v.high >> 30) == 1u);
        CHECK(field(step.v.high, 0) == static_cast<uint32_t>(Bt::kAtomBytes));
        for (int32_t k = 0; k < Bt::kScoreStepDims; ++k) {
            const int32_t dim = block * Bt::kScoreStepDims + k;
            for (int32_t key = 0; key < Bt::kTileKeysW; ++key, ++checked)
                wrong += k_major_address(step.v, key, k * kBf16) != stage_address(stage, key, dim);
            for (int32_t row = 0; row < Bt::kTermColumns; ++row, ++checked)
                wrong += k_major_address(step.q, row, k * kBf16) != fold_address(fold, row, dim);
        }
    }
    CHECK(checked == int64_t{Bt::kHeadDim} * (Bt::kTileKeysW + Bt::kTermColumns));
    CHECK(wrong == 0);
}

TEST_CASE("kfvw bf16 layout: the transposed V^T steps read each warpgroup's dims of the stage, P^T its keys") {
    const uint32_t stage = kBase, p_tile = kBase + Bt::kStageBytes;
    int64_t wrong_v = 0, wrong_p = 0, checked = 0;
    std::set<uint32_t> v_read;
    for (int32_t group = 0; group < Bt::kWarpGroups; ++group)
        for (int32_t block = 0; block < Bt::kPvDimBlocks; ++block)
            for (int32_t step = 0; step < Bt::kPvSteps; ++step) {
                const SmemDescriptor a = kfvw_bf16::pv_v_descriptor(stage, group, block, step);
                CHECK((a.high >> 30) == 1u);
                for (int32_t m = 0; m < Bt::kPvDimBlock; ++m)
                    for (int32_t k = 0; k < Bt::kPvStepKeys; ++k, ++checked) {
                        const int32_t dim = kfvw_bf16::pv_row_dim(group, block, m);
                        const int32_t key = step * Bt::kPvStepKeys + k;
                        const uint32_t address = mn_major_address(a, m, k);
                        wrong_v += address != stage_address(stage, key, dim);
                        v_read.insert(address);
                    }
            }
    CHECK(checked == int64_t{Bt::kHeadDim} * Bt::kTileKeysW);
    CHECK(wrong_v == 0);
    CHECK(v_read.size() == static_cast<size_t>(Bt::kHeadDim * Bt::kTileKeysW));  // every element once

    std::set<uint32_t> p_slots;
    for (int32_t head = 0; head < Bt::kGroup; ++head)
        for (int32_t key = 0; key < Bt::kTileKeysW; ++key) p_slots.insert(kfvw_bf16::p_offset(head, key));
    CHECK(p_slots.size() == static_cast<size_t>(Bt::kGroup * Bt::kTileKeysW));
    CHECK(*p_slots.rbegin() + kBf16 == static_cast<uint32_t>(Bt::kPTileBytes));
    for (int32_t step = 0; step < Bt::kPvSteps; ++step) {
        const SmemDescriptor b = kfvw_bf16::pv_p_descriptor(p_tile, step);
        CHECK((b.high >> 30) == 0u);
        for (int32_t head = 0; head < Bt::kGroup; ++head)
            for (int32_t k = 0; k < Bt::kPvStepKeys; ++k)
                wrong_p += interleaved_k_major_address(b, head, k) !=
                           p_tile + kfvw_bf16::p_offset(head, step * Bt::kPvStepKeys + k);
    }
    CHECK(wrong_p == 0);
}

TEST_CASE("kfvw bf16 layout: the copy plan fills every vector of a tile once, the score blocks split the dims") {
    // Warp w copies sub-tile w / 2, vector kCopyVecsPerWarp (w % 2) + lane of each of its 16 keys.
    std::set<uint32_t> written;
    for (int32_t warp = 0; warp < Bt::kWarps; ++warp)
        for (int32_t lane = 0; lane < Bt::kWarpSize; ++lane)
            for (int32_t key = 0; key < Bt::kSubTileKeys; ++key) {
                const int32_t sub = warp / Bt::kCopyWarpsPerSubTile;
                const int32_t vec = Bt::kCopyVecsPerWarp * (warp % Bt::kCopyWarpsPerSubTile) + lane;
                written.insert(kfvw_bf16::stage_offset(sub * Bt::kSubTileKeys + key, vec));
            }
    CHECK(written.size() == static_cast<size_t>(Bt::kTileKeysW * Bt::kVecsPerRow));

    // Every 16-dim block is either one warpgroup's wgmma (unrotated, in its half) or part of a
    // rotated Q load q (dims 32 q .. and 256 + 32 q ..), whose K build warpgroup q % 2 runs.
    for (int32_t rotary_dims : {0, 2, 64, 72, 128, 256, 512}) {
        const int32_t dims_per_q_load = Bt::kMmaK * Bt::kKStepsPerQLoad;
        const int32_t rotated_q_loads =
            std::min((rotary_dims / 2 + dims_per_q_load - 1) / dims_per_q_load, Bt::kQLoadsPerChunk);
        std::multiset<int32_t> dims;
        for (int32_t group = 0; group < Bt::kWarpGroups; ++group) {
            for (int32_t j = Bt::kScoreStepsPerQLoad * rotated_q_loads; j < Bt::kGroupScoreSteps; ++j) {
                const int32_t block = group * Bt::kGroupScoreSteps + j;
                CHECK_FALSE(kfvw_bf16::block_rotates(block, rotated_q_loads));
                for (int32_t k = 0; k < Bt::kScoreStepDims; ++k) dims.insert(block * Bt::kScoreStepDims + k);
            }
            for (int32_t q = group; q < rotated_q_loads; q += Bt::kWarpGroups)
                for (int32_t d = 0; d < dims_per_q_load; ++d) {
                    CHECK(kfvw_bf16::block_rotates((q * dims_per_q_load + d) / Bt::kScoreStepDims, rotated_q_loads));
                    dims.insert(q * dims_per_q_load + d);
                    dims.insert(Bt::kHalfDim + q * dims_per_q_load + d);
                }
        }
        CHECK(dims.size() == static_cast<size_t>(Bt::kHeadDim));
        CHECK(std::set<int32_t>(dims.begin(), dims.end()).size() == static_cast<size_t>(Bt::kHeadDim));
        // Every dim below rotary_dims / 2 (and its partner) lies in a rotated block.
        for (int32_t d = 0; d < rotary_dims / 2; ++d) {
            CHECK(kfvw_bf16::block_rotates(d / Bt::kScoreStepDims, rotated_q_loads));
            CHECK(kfvw_bf16::block_rotates((Bt::kHalfDim + d) / Bt::kScoreStepDims, rotated_q_loads));
        }
    }
}

TEST_CASE("kfvw bf16 layout: two bf16 terms hold Q' to 2^-16 of it, one to 2^-8") {
    std::mt19937 rng(20261206);
    std::uniform_real_distribution<float> exponent(-100.0f, 100.0f);
    std::uniform_int_distribution<int> sign(0, 1);
    int64_t two_term_wrong = 0, one_term_wrong = 0, not_bf16 = 0;
    constexpr int32_t kSamples = 200000;
    const auto bound = [](float x) { return std::fabs(x) * 0x1p-16f; };
    for (int32_t n = 0; n < kSamples; ++n) {
        const float x = (sign(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
        const kfvw_bf16::Bf16Terms terms = kfvw_bf16::split_bf16_terms(x);
        not_bf16 += round_to_bf16(terms.hi) != terms.hi || round_to_bf16(terms.lo) != terms.lo;
        two_term_wrong += std::fabs(static_cast<double>(x) - (static_cast<double>(terms.hi) + terms.lo)) > bound(x);
        one_term_wrong += std::fabs(x - terms.hi) > bound(x);
        CHECK(std::fabs(x - terms.hi) <= std::fabs(x) * 0x1p-8f);
    }
    CHECK(not_bf16 == 0);
    CHECK(two_term_wrong == 0);
    CHECK(one_term_wrong > kSamples / 2);  // the second term is what reaches the bound

    // Past bf16's largest value hi is rounded toward zero and stays finite; non-finite x gives a
    // non-finite hi and a NaN lo.
    const float big = std::numeric_limits<float>::max();
    const kfvw_bf16::Bf16Terms top = kfvw_bf16::split_bf16_terms(big);
    CHECK(std::isfinite(top.hi));
    CHECK(std::isfinite(top.lo));
    CHECK(static_cast<double>(top.hi) + top.lo == doctest::Approx(static_cast<double>(big)).epsilon(1e-6));
    const kfvw_bf16::Bf16Terms inf = kfvw_bf16::split_bf16_terms(std::numeric_limits<float>::infinity());
    CHECK(std::isinf(inf.hi));
    CHECK(std::isnan(inf.lo));
    CHECK(std::isnan(kfvw_bf16::split_bf16_terms(std::nanf("")).lo));
}
