// test_kfvw_layout.cpp - decode_e4m3kfvw_d512's shared-memory layouts against the wgmma descriptors
// that read them, on the CPU (fp8/decode_e4m3kfvw_d512/layout.h): the V stage and the Q' tile
// under the score steps (128-byte swizzle, K-major), the P^T tile under the P V steps (K-major
// without swizzle) against the keys the V^T register fragments hold (a model of the transposed
// ldmatrix and the byte permutes of mainloop.cuh), the dims those fragments' rows hold, and the
// two-term e4m3 split of Q' and P (x = hi + lo 2^-4 to 2^-8 of |x| plus 2^-14, where one term
// alone is off by up to 2^-4 of |x|).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>

#include "fp8/codec/e4m3.h"
#include "fp8/decode_e4m3kfvw_d512/layout.h"
#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "kernels/common/wgmma_layout.h"

using namespace wideattn;
using namespace wideattn::hopper;
using Kt = DecodeE4m3KfvWD512Traits;

namespace {

constexpr uint32_t kBase = 0x400;  // a 1024-byte aligned shared address
constexpr int32_t kAtomRowBytes = 128;
constexpr int32_t kCoreRows = 8;
constexpr int32_t kCoreRowBytes = 16;

uint32_t field(uint32_t word, int shift) { return ((word >> shift) & kDescFieldMask) << kDescUnitShift; }

// PTX ISA 128-byte swizzle: address bits [4:6] ^= bits [7:9].
uint32_t swizzled(uint32_t address) { return address ^ (((address >> 7) & 7u) << 4); }

// Element (row m, byte k) of a K-major operand with 128-byte swizzle.
uint32_t k_major_address(SmemDescriptor d, int32_t m, int32_t k) {
    const uint32_t start = field(d.low, 0), stride = field(d.high, 0);
    return swizzled(start + (m / 8) * stride + (m % 8) * kAtomRowBytes + k);
}

// Element (n, k) of a K-major 8-bit operand without swizzle.
uint32_t interleaved_k_major_address(SmemDescriptor d, int32_t n, int32_t k) {
    const uint32_t start = field(d.low, 0), leading = field(d.low, kDescLeadingShift), stride = field(d.high, 0);
    return start + (n / kCoreRows) * stride + (n % kCoreRows) * kCoreRowBytes + (k / kCoreRowBytes) * leading +
           k % kCoreRowBytes;
}

// A transposed ldmatrix (b16) of 8 rows (keys) x 16 bytes gives lane (g, t) the bytes {row 2t:
// 2g, 2g + 1; row 2t + 1: 2g, 2g + 1}: the (key, byte) of byte i of its word.
struct KeyByte {
    int32_t key;
    int32_t byte;
};
KeyByte trans_ldmatrix_byte(int32_t lane, int32_t i) {
    const int32_t g = lane / 4, t = lane % 4;
    return KeyByte{2 * t + i / 2, 2 * g + i % 2};
}

// __byte_perm(first, second, selector) as the kernel's merge_even_dim / merge_odd_dim use it:
// result byte i = byte (selector >> 4i) & 7 of {first, second}.
int32_t perm_source(uint32_t selector, int32_t i) { return static_cast<int32_t>((selector >> (4 * i)) & 7u); }

}  // namespace

TEST_CASE("kfvw layout: the V stage and Q' are where the score steps read them") {
    std::set<uint32_t> slots;
    for (int32_t key = 0; key < Kt::kGroupTileKeys; ++key)
        for (int32_t vec = 0; vec < Kt::kVecsPerRow; ++vec) slots.insert(kfvw::stage_offset(key, vec));
    CHECK(slots.size() == static_cast<size_t>(Kt::kGroupTileKeys * Kt::kVecsPerRow));
    CHECK(*slots.rbegin() + Kt::kVecBytes == static_cast<uint32_t>(Kt::kStageBytes));
    std::set<uint32_t> fold_slots;
    for (int32_t row = 0; row < Kt::kTermColumns; ++row)
        for (int32_t vec = 0; vec < Kt::kVecsPerRow; ++vec) fold_slots.insert(kfvw::fold_offset(row, vec));
    CHECK(fold_slots.size() == static_cast<size_t>(Kt::kTermColumns * Kt::kVecsPerRow));
    CHECK(*fold_slots.rbegin() + Kt::kVecBytes == static_cast<uint32_t>(Kt::kFoldBytes));

    const uint32_t stage = kBase, fold = kBase + Kt::kStageBytes;
    int64_t wrong = 0, checked = 0;
    for (int32_t block = 0; block < Kt::kDimBlocks; ++block) {
        const FoldScoreStep step = fold_score_step<Kt>(stage, fold, block);
        CHECK((step.v.high >> 30) == 1u);
        CHECK(field(step.v.high, 0) == static_cast<uint32_t>(Kt::kAtomBytes));
        for (int32_t k = 0; k < Kt::kScoreStepBytes; ++k) {
            const int32_t dim = block * Kt::kDimBlock + k;
            for (int32_t key = 0; key < Kt::kGroupTileKeys; ++key, ++checked)
                wrong += k_major_address(step.v, key, k) !=
                         stage + kfvw::stage_offset(key, dim / Kt::kVecBytes) + dim % Kt::kVecBytes;
            for (int32_t row = 0; row < Kt::kTermColumns; ++row, ++checked)
                wrong += k_major_address(step.q, row, k) !=
                         fold + kfvw::fold_offset(row, dim / Kt::kVecBytes) + dim % Kt::kVecBytes;
        }
    }
    CHECK(checked == int64_t{Kt::kHeadDim} * (Kt::kGroupTileKeys + Kt::kTermColumns));
    CHECK(wrong == 0);
}

TEST_CASE("kfvw layout: the P^T tile holds each key where the V^T fragments put it, and rows are the dims") {
    // Key order inside a 16-key group: a bijection.
    std::set<int32_t> positions;
    for (int32_t key = 0; key < 16; ++key) positions.insert(kfvw::pv_key_position(key));
    CHECK(positions.size() == 16u);
    CHECK(*positions.rbegin() == 15);
    std::set<uint32_t> p_slots;
    for (int32_t column = 0; column < Kt::kTermColumns; ++column)
        for (int32_t key = 0; key < Kt::kGroupTileKeys; ++key) p_slots.insert(kfvw::p_offset(column, key));
    CHECK(p_slots.size() == static_cast<size_t>(Kt::kPTileBytes));
    CHECK(*p_slots.rbegin() + 1 == static_cast<uint32_t>(Kt::kPTileBytes));

    // Model: lane (g, t) of warp w, P V step s, dim block D: matrix m of the transposed ldmatrix.x4
    // is keys 32 s + 8 m .. of vector 4 D + w; register r = merge_{even, odd}(matrix 2 (r / 2),
    // matrix 2 (r / 2) + 1) by r % 2; the PTX 8-bit A layout puts its byte i at row g + 8 (r % 2),
    // column k = 16 (r / 2) + 4t + i. B column k of step s must be the P^T byte of that key, and
    // the row's dim pv_row_dim.
    constexpr uint32_t kEven = 0x6420, kOdd = 0x7531;
    const uint32_t tile = kBase;
    int64_t wrong_keys = 0, wrong_dims = 0, checked = 0;
    for (int32_t step = 0; step < Kt::kPvSteps; ++step) {
        const SmemDescriptor b = kfvw::pv_step_descriptor(tile, step);
        CHECK((b.high >> 30) == 0u);
        for (int32_t warp = 0; warp < Kt::kWarpsPerGroup; ++warp)
            for (int32_t lane = 0; lane < Kt::kWarpSize; ++lane)
                for (int32_t r = 0; r < 4; ++r)
                    for (int32_t i = 0; i < 4; ++i) {
                        const int32_t g = lane / 4, t = lane % 4;
                        const int32_t source = perm_source(r % 2 == 0 ? kEven : kOdd, i);
                        const int32_t matrix = 2 * (r / 2) + source / 4;
                        const KeyByte kb = trans_ldmatrix_byte(lane, source % 4);
                        const int32_t key = step * Kt::kPvStepKeys + 8 * matrix + kb.key;
                        const int32_t k = 16 * (r / 2) + 4 * t + i;
                        const int32_t row = warp * 16 + g + 8 * (r % 2);
                        for (int32_t d = 0; d < Kt::kPvDimBlocks; ++d) {
                            const int32_t dim = (d * Kt::kWarpsPerGroup + warp) * Kt::kVecBytes + kb.byte;
                            wrong_dims += kfvw::pv_row_dim(d, row) != dim;
                        }
                        for (int32_t column = 0; column < Kt::kTermColumns; ++column, ++checked)
                            wrong_keys += interleaved_k_major_address(b, column, k) != tile + kfvw::p_offset(column, key);
                    }
    }
    CHECK(checked == int64_t{Kt::kPvSteps} * Kt::kWarpsPerGroup * Kt::kWarpSize * 16 * Kt::kTermColumns);
    CHECK(wrong_keys == 0);
    CHECK(wrong_dims == 0);
}

TEST_CASE("kfvw layout: two e4m3 terms hold a value in [-256, 256] to 2^-8 of it plus 2^-14") {
    std::mt19937 rng(20261206);
    std::uniform_real_distribution<float> exponent(-16.0f, 8.0f);
    std::uniform_int_distribution<int> sign(0, 1);
    int64_t two_term_wrong = 0, one_term_wrong = 0;
    constexpr int32_t kSamples = 200000;
    const auto bound = [](float x) { return std::fabs(x) * 0x1p-8f + 0x1p-14f; };
    for (int32_t n = 0; n < kSamples; ++n) {
        const float x = (sign(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
        bool nonfinite = false;
        const uint8_t hi = fp8::e4m3_from_float(x, &nonfinite);
        const float residual = x - fp8::e4m3_to_float(hi);  // exact: hi is within a factor 2 of x
        const uint8_t lo = fp8::e4m3_from_float(residual * Kt::kLowTermScale, &nonfinite);
        CHECK_FALSE(nonfinite);
        CHECK(std::fabs(residual * Kt::kLowTermScale) <= 128.0f);
        const float two = fp8::e4m3_to_float(hi) + fp8::e4m3_to_float(lo) * Kt::kLowTermWeight;
        two_term_wrong += std::fabs(x - two) > bound(x);
        one_term_wrong += std::fabs(x - fp8::e4m3_to_float(hi)) > bound(x);
    }
    CHECK(two_term_wrong == 0);
    CHECK(one_term_wrong > kSamples / 4);  // the second term is what reaches the bound
    // Q' = 256 (a rounded-up top) and P = 256 (exp2(0) 2^8) stay finite in both terms.
    bool nonfinite = false;
    CHECK(fp8::e4m3_to_float(fp8::e4m3_from_float(256.0f, &nonfinite)) == 256.0f);
    CHECK(Kt::kLowTermScale * Kt::kLowTermWeight == 1.0f);
    CHECK(std::exp2(static_cast<float>(Kt::kProbScaleLog2)) < fp8::kE4m3Max);
}
