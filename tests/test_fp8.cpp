// test_fp8.cpp - the e4m3 codec against CUDA's own host conversion (cuda_fp8.h) on every
// code, every rounding midpoint and random floats; and the quantise-into-cache reference.
#include <doctest/doctest.h>

#include <cuda_fp8.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/e4m3.h"
#include "fp8/quantize_reference.h"

using namespace wideattn;
using namespace wideattn::fp8;

namespace {

uint8_t cuda_encode(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }

float cuda_decode(uint8_t code) {
    const __half h(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3));
    return __half2float(h);
}

float next_up(float x) { return std::nextafter(x, INFINITY); }
float next_down(float x) { return std::nextafter(x, -INFINITY); }

// Our encoding of a finite float must equal CUDA's saturating one.
void check_encode(float x) {
    bool nonfinite = false;
    const uint8_t ours = e4m3_from_float(x, &nonfinite);
    CAPTURE(x);
    CHECK_FALSE(nonfinite);
    CHECK(static_cast<int>(ours) == static_cast<int>(cuda_encode(x)));
}

}  // namespace

TEST_CASE("e4m3: decoding every code matches CUDA") {
    for (int code = 0; code < 256; ++code) {
        const float ours = e4m3_to_float(static_cast<uint8_t>(code));
        const float want = cuda_decode(static_cast<uint8_t>(code));
        CAPTURE(code);
        if (std::isnan(want)) {
            CHECK(std::isnan(ours));
        } else {
            CHECK(ours == want);
            CHECK(std::signbit(ours) == std::signbit(want));
        }
    }
    CHECK(e4m3_to_float(0x7E) == 448.0f);
    CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
    CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
}

TEST_CASE("e4m3: encoding matches CUDA at every value, midpoint and neighbour") {
    for (int code = 0; code < 0x7E; ++code) {
        const float low = e4m3_to_float(static_cast<uint8_t>(code));
        const float high = e4m3_to_float(static_cast<uint8_t>(code + 1));
        const float mid = (low + high) / 2;  // exact: both have few significant bits
        for (float x : {low, high, mid, next_up(mid), next_down(mid), next_up(low), next_down(high)}) {
            check_encode(x);
            check_encode(-x);
        }
    }
    // Saturation: 448 up to the largest float, and the rounding boundary just above 448.
    for (float x : {448.0f, 464.0f, next_down(464.0f), next_up(464.0f), 480.0f, 1e6f, 3.4e38f}) {
        check_encode(x);
        check_encode(-x);
    }
    // Below the smallest subnormal: rounds to zero or to 2^-9.
    for (float x : {1e-30f, std::ldexp(1.0f, -10), next_up(std::ldexp(1.0f, -10)), std::ldexp(1.5f, -10)}) {
        check_encode(x);
        check_encode(-x);
    }
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 200000; ++i) {
        uint32_t bits = any_bits(rng);
        float x;
        std::memcpy(&x, &bits, sizeof x);
        if (!std::isfinite(x)) continue;
        check_encode(x);
    }
}

TEST_CASE("e4m3: NaN and infinities are flagged, never finite") {
    for (float x : {NAN, -NAN, INFINITY, -INFINITY}) {
        bool nonfinite = false;
        const uint8_t code = e4m3_from_float(x, &nonfinite);
        CAPTURE(x);
        CHECK(nonfinite);
        CHECK((code & 0x7F) == kE4m3NaN);
        CHECK(std::isnan(e4m3_to_float(code)));
    }
    bool nonfinite = false;
    e4m3_from_float(1.0f, &nonfinite);
    CHECK_FALSE(nonfinite);
}

TEST_CASE("fp8 quantize: scale, amax and the paged cache layout") {
    CHECK(e4m3_scale_for_amax(896.0f) == 2.0f);
    CHECK(e4m3_scale_for_amax(0.0f) == 1.0f);

    const int64_t tokens = 5, heads = 2, dim = 16, block_size = 16, num_blocks = 3;
    std::vector<uint16_t> src(tokens * heads * dim);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (auto& x : src) x = float_to_bf16(normal(rng));
    src[7] = float_to_bf16(NAN);
    src[40] = float_to_bf16(INFINITY);
    int64_t nonfinite = 0, first = -1;
    const float amax = bf16_amax(src.data(), static_cast<int64_t>(src.size()), &nonfinite, &first);
    CHECK(nonfinite == 2);
    CHECK(first == 7);
    CHECK(amax > 0.0f);
    const float scale = e4m3_scale_for_amax(amax) / 2;  // half the safe scale: some values saturate

    CacheLayout layout;
    layout.num_blocks = num_blocks;
    layout.block_size = block_size;
    layout.head_stride = dim;
    layout.slot_stride = heads * dim;
    layout.block_stride = block_size * heads * dim;
    std::vector<uint8_t> cache(num_blocks * layout.block_stride, 0xAA);
    const std::vector<int64_t> slots = {33, 2, -1, 16, 47};  // token 2 is padding
    QuantizeReport report;
    REQUIRE(quantize_to_cache_reference(src.data(), tokens, heads, dim, heads * dim, dim, slots.data(), scale, layout,
                                        cache.data(), &report)
                .empty());
    CHECK(report.nonfinite == 2);
    CHECK(report.first_nonfinite == 7);
    CHECK(report.saturated > 0);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < dim; ++d) {
                const int64_t i = (t * heads + h) * dim + d;
                if (slots[t] < 0) continue;
                const uint8_t stored = cache[(slots[t] / block_size) * layout.block_stride +
                                             (slots[t] % block_size) * layout.slot_stride + h * layout.head_stride + d];
                const float x = bf16_to_float(src[i]);
                if (!std::isfinite(x)) {
                    CHECK(std::isnan(e4m3_to_float(stored)));
                    continue;
                }
                const float back = e4m3_to_float(stored) * scale;
                const float clipped = std::fmin(std::fabs(x), kE4m3Max * scale);
                CHECK(std::fabs(std::fabs(back) - clipped) <= clipped * 0.0625f + 1e-6f);  // 3 mantissa bits
            }
    // Slots nobody wrote keep their bytes; the padding token wrote nothing.
    CHECK(cache[1 * layout.slot_stride] == 0xAA);
    const int64_t used[] = {33, 2, 16, 47};
    int64_t untouched = 0;
    for (int64_t slot = 0; slot < num_blocks * block_size; ++slot) {
        bool is_used = false;
        for (int64_t u : used) is_used |= u == slot;
        if (!is_used) untouched += cache[(slot / block_size) * layout.block_stride + (slot % block_size) * layout.slot_stride] == 0xAA;
    }
    CHECK(untouched == num_blocks * block_size - 4);
}

TEST_CASE("fp8 quantize: bad arguments are refused before writing") {
    std::vector<uint16_t> src(32, float_to_bf16(1.0f));
    std::vector<uint8_t> cache(64, 0xAA);
    CacheLayout layout{2, 16, 32, 2, 1};
    QuantizeReport report;
    const int64_t past_end[] = {32};
    CHECK(quantize_to_cache_reference(src.data(), 1, 1, 2, 2, 2, past_end, 1.0f, layout, cache.data(), &report)
              .find("slot_mapping[0]=32 is past the cache") != std::string::npos);
    const int64_t ok_slot[] = {0};
    CHECK(quantize_to_cache_reference(src.data(), 1, 1, 2, 2, 2, ok_slot, 0.0f, layout, cache.data(), &report)
              .find("scale=") != std::string::npos);
    CHECK(quantize_to_cache_reference(src.data(), 1, 0, 2, 2, 2, ok_slot, 1.0f, layout, cache.data(), &report)
              .find("heads=0") != std::string::npos);
    CHECK(cache[0] == 0xAA);
}
