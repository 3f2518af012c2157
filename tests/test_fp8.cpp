// test_fp8.cpp - the e4m3 codec against CUDA's own host conversion (cuda_fp8.h) on every
// code, every rounding midpoint and random floats; quantising with a scale (saturation, the
// overflow of x / scale); the per-tensor scale convention and its reference; and the
// quantise-into-cache reference, paged (engine and transposed V layouts) and flat (Q); the codes as
// bf16 by bit operations (e4m3x4_to_scaled_bf16x2x2) on every code at every byte of a word.
#include <doctest/doctest.h>

#include <cuda_fp8.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/codec/e4m3.h"
#include "fp8/codec/quantize_reference.h"
#include "kernels/common/v_transposed.h"

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

TEST_CASE("e4m3 to bf16 by bit operations: every code at every byte is its value times 2^-120, NaN finite") {
    // e4m3x4_to_scaled_bf16x2x2 (decode_e4m3kfvb_d512's product path): the half of each byte
    // depends on that byte alone, (b0, b2) in `even`, (b1, b3) in `odd`.
    constexpr int kBytes = 4;
    constexpr int kHalfBits = 16;
    constexpr uint32_t kHalfMask = 0xffffu;
    std::mt19937 rng(2026);
    for (int position = 0; position < kBytes; ++position) {
        for (int code = 0; code < 256; ++code) {
            CAPTURE(position);
            CAPTURE(code);
            uint32_t word = rng();
            const int shift = 8 * position;
            word = (word & ~(0xffu << shift)) | (static_cast<uint32_t>(code) << shift);
            uint32_t even = 0, odd = 0;
            e4m3x4_to_scaled_bf16x2x2(word, &even, &odd);
            const uint32_t pair = position % 2 == 0 ? even : odd;
            const uint16_t half = static_cast<uint16_t>((pair >> (kHalfBits * (position / 2))) & kHalfMask);
            const float got = bf16_to_float(half);
            const float value = e4m3_to_float(static_cast<uint8_t>(code));
            CHECK(std::signbit(got) == ((code & 0x80) != 0));
            if (std::isnan(value)) {
                CHECK(std::isfinite(got));
                CHECK(std::fabs(got) == std::ldexp(1.875f, -112));
            } else {
                CHECK(got == std::ldexp(value, -kE4m3ToBf16ExponentShift));
            }
        }
    }
    CHECK(kE4m3ToBf16ExponentShift == 120);
}

TEST_CASE("fp8 quantize: scale, amax and the paged cache layout") {
    CHECK(e4m3_scale_for_amax(896.0f) == 2.0f);

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

TEST_CASE("e4m3: quantising with a reciprocal scale saturates overflow and flags only NaN/inf inputs") {
    std::mt19937 rng(11);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 100000; ++i) {
        const float x = bits_float(any_bits(rng));
        const float inverse = bits_float((any_bits(rng) & 0x3FFFFFFFu) | 0x00800000u);  // positive, normal
        bool flagged = false;
        const uint8_t code = e4m3_quantize(x, inverse, &flagged);
        CAPTURE(x);
        CAPTURE(inverse);
        if (!std::isfinite(x)) {
            CHECK(flagged);
            CHECK((code & 0x7F) == kE4m3NaN);
            CHECK((code & 0x80) == (std::signbit(x) ? 0x80 : 0));
        } else if (!std::isfinite(x * inverse)) {
            CHECK_FALSE(flagged);
            CHECK(static_cast<int>(code) == (std::signbit(x) ? 0xFE : 0x7E));  // +-448
        } else {
            bool direct_flag = false;
            CHECK(code == e4m3_from_float(x * inverse, &direct_flag));
            CHECK_FALSE(flagged);
        }
    }
    // The smallest scale's reciprocal is finite; a finite input beyond float range after scaling
    // saturates instead of becoming NaN.
    bool flagged = false;
    CHECK(e4m3_quantize(1e10f, 1.0f / kE4m3MinScale, &flagged) == 0x7E);
    CHECK(e4m3_quantize(-3.0e38f, 1.0f / kE4m3MinScale, &flagged) == 0xFE);
    CHECK(e4m3_quantize(0.0f, 1.0f / kE4m3MinScale, &flagged) == 0x00);
    CHECK_FALSE(flagged);
    // A zero scale (infinite reciprocal) times 0 is NaN: flagged, never a finite code.
    CHECK((e4m3_quantize(0.0f, INFINITY, &flagged) & 0x7F) == kE4m3NaN);
    CHECK(flagged);
}

TEST_CASE("e4m3 scale: amax / 448 floored at 2^-126, monotonic, so the max of scales is the scale of the max") {
    CHECK(kE4m3MinScale == std::ldexp(1.0f, -126));
    CHECK(std::isfinite(1.0f / kE4m3MinScale));
    CHECK(e4m3_scale_for_amax(0.0f) == kE4m3MinScale);  // all-zero tensor
    CHECK(e4m3_scale_for_amax(1e-40f) == kE4m3MinScale);
    CHECK(e4m3_scale_for_amax(NAN) == kE4m3MinScale);
    CHECK(e4m3_scale_for_amax(-1.0f) == kE4m3MinScale);
    CHECK(e4m3_scale_for_amax(448.0f) == 1.0f);
    const float bf16_max = bf16_to_float(0x7F7F);
    CHECK(e4m3_scale_for_amax(bf16_max) == bf16_max / 448.0f);
    CHECK(std::isfinite(1.0f / e4m3_scale_for_amax(bf16_max)));
    // The largest |x| maps onto 448 (saturating by at most rounding) for every bf16 magnitude.
    for (uint32_t b = 1; b < 0x7F80; ++b) {
        const float amax = bf16_to_float(static_cast<uint16_t>(b));
        const float scale = e4m3_scale_for_amax(amax);
        CAPTURE(amax);
        REQUIRE(scale >= kE4m3MinScale);
        REQUIRE(std::isfinite(1.0f / scale));
        bool flagged = false;
        const uint8_t code = e4m3_quantize(amax, 1.0f / scale, &flagged);
        REQUIRE_FALSE(flagged);
        if (scale > kE4m3MinScale) REQUIRE(static_cast<int>(code) == 0x7E);
    }
    std::mt19937 rng(5);
    std::uniform_int_distribution<uint32_t> finite_magnitude(0, 0x7F7FFFFFu);
    for (int i = 0; i < 200000; ++i) {
        const float a = bits_float(finite_magnitude(rng)), b = bits_float(finite_magnitude(rng));
        const float sa = e4m3_scale_for_finite_amax(a), sb = e4m3_scale_for_finite_amax(b);
        CAPTURE(a);
        CAPTURE(b);
        REQUIRE(std::fmax(sa, sb) == e4m3_scale_for_finite_amax(std::fmax(a, b)));
        REQUIRE((float_bits(sa) < float_bits(sb)) == (sa < sb));  // the atomicMax on bits orders like values
    }
}

TEST_CASE("e4m3 power-of-two scale: the smallest power of two at or above the scale, monotonic") {
    CHECK(e4m3_power_of_two_scale(kE4m3MinScale) == kE4m3MinScale);
    CHECK(e4m3_power_of_two_scale(1.0f) == 1.0f);
    CHECK(e4m3_power_of_two_scale(0.0037f) == 0.00390625f);          // 2^-8
    CHECK(e4m3_power_of_two_scale(std::nextafter(0.5f, 1.0f)) == 1.0f);
    CHECK(e4m3_power_of_two_scale(std::nextafter(0.5f, 0.0f)) == 0.5f);
    CHECK(kE4m3MaxPowerOfTwoScale == std::ldexp(1.0f, 119));
    CHECK(e4m3_power_of_two_scale(std::nextafter(kE4m3MaxPowerOfTwoScale, 0.0f)) == kE4m3MaxPowerOfTwoScale);
    const float above = std::nextafter(kE4m3MaxPowerOfTwoScale, INFINITY);
    CHECK(e4m3_power_of_two_scale(above) == above);   // 2^120 would decode 256 to infinity: kept
    // Every scale of a bf16 amax: a power of two p with scale <= p < 2 scale up to 2^119 (the
    // scale itself above), the largest |x| then coded in [224, 448] (above the floor) without a
    // flag, and code x p exact and finite in fp32.
    for (uint32_t b = 0; b < 0x7F80; ++b) {
        const float amax = bf16_to_float(static_cast<uint16_t>(b));
        const float scale = e4m3_scale_for_amax(amax);
        const float p = e4m3_power_of_two_scale(scale);
        CAPTURE(amax);
        bool flagged = false;
        const uint8_t code = e4m3_quantize(amax, 1.0f / p, &flagged);
        REQUIRE_FALSE(flagged);
        const float decoded = e4m3_to_float(code) * p;
        REQUIRE(std::isfinite(decoded));
        if (scale > kE4m3MaxPowerOfTwoScale) {
            REQUIRE(p == scale);
            continue;
        }
        int exponent = 0;
        REQUIRE(std::frexp(p, &exponent) == 0.5f);
        REQUIRE(p >= scale);
        REQUIRE(p < 2.0f * scale);
        REQUIRE(decoded / p == e4m3_to_float(code));
        if (scale > kE4m3MinScale) REQUIRE(e4m3_to_float(code) >= 224.0f);
    }
    // Monotonic: the max of the rounded block scales is the rounded scale of the max (the kernel's atomicMax).
    std::mt19937 rng(11);
    std::uniform_int_distribution<uint32_t> finite_magnitude(0, 0x7F7FFFFFu);
    for (int i = 0; i < 200000; ++i) {
        const float a = bits_float(finite_magnitude(rng)), b = bits_float(finite_magnitude(rng));
        const float pa = e4m3_power_of_two_scale(e4m3_scale_for_finite_amax(a));
        const float pb = e4m3_power_of_two_scale(e4m3_scale_for_finite_amax(b));
        CAPTURE(a);
        CAPTURE(b);
        REQUIRE(std::fmax(pa, pb) == e4m3_power_of_two_scale(e4m3_scale_for_finite_amax(std::fmax(a, b))));
    }
}

TEST_CASE("fp8 scale reference: strided source, padding tokens skipped, NaN/inf counted, edge cases") {
    const int64_t tokens = 6, heads = 3, dim = 16, head_stride = 24, token_stride = 80;  // gaps between rows
    const uint16_t gap = float_to_bf16(1e30f);  // never read: would dominate the amax
    std::vector<uint16_t> src(tokens * token_stride, gap);
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < dim; ++d) src[t * token_stride + h * head_stride + d] = float_to_bf16(normal(rng));
    src[1 * token_stride + 2 * head_stride + 5] = float_to_bf16(-37.5f);  // the amax
    src[2 * token_stride + 0 * head_stride + 3] = float_to_bf16(NAN);
    src[4 * token_stride + 1 * head_stride + 0] = float_to_bf16(-INFINITY);
    src[3 * token_stride + 0 * head_stride + 9] = float_to_bf16(5e4f);  // padding token: skipped
    src[3 * token_stride + 1 * head_stride + 9] = float_to_bf16(NAN);   // skipped, not counted
    const std::vector<int64_t> slots = {7, 0, 12, -1, 3, 9};
    ScaleReport report;
    REQUIRE(scale_reference(src.data(), tokens, heads, dim, token_stride, head_stride, slots.data(), &report).empty());
    CHECK(report.amax == 37.5f);
    CHECK(report.scale == 37.5f / 448.0f);
    CHECK(report.nonfinite == 2);
    CHECK(report.first_nonfinite == (2 * heads + 0) * dim + 3);
    // Without a slot mapping every token counts.
    REQUIRE(scale_reference(src.data(), tokens, heads, dim, token_stride, head_stride, nullptr, &report).empty());
    CHECK(report.amax == bf16_to_float(float_to_bf16(5e4f)));
    CHECK(report.nonfinite == 3);
    // Empty, all-zero and all-NaN tensors get the floor.
    REQUIRE(scale_reference(src.data(), 0, heads, dim, token_stride, head_stride, nullptr, &report).empty());
    CHECK(report.scale == kE4m3MinScale);
    CHECK(report.nonfinite == 0);
    std::vector<uint16_t> zeros(heads * dim, float_to_bf16(-0.0f));
    REQUIRE(scale_reference(zeros.data(), 1, heads, dim, heads * dim, dim, nullptr, &report).empty());
    CHECK(report.scale == kE4m3MinScale);
    std::vector<uint16_t> nans(heads * dim, float_to_bf16(NAN));
    REQUIRE(scale_reference(nans.data(), 1, heads, dim, heads * dim, dim, nullptr, &report).empty());
    CHECK(report.scale == kE4m3MinScale);
    CHECK(report.nonfinite == heads * dim);
    CHECK(report.first_nonfinite == 0);
    CHECK(scale_reference(src.data(), -1, heads, dim, token_stride, head_stride, nullptr, &report)
              .find("tokens=-1") != std::string::npos);
    CHECK(scale_reference(nullptr, 1, heads, dim, token_stride, head_stride, nullptr, &report).find("null") !=
          std::string::npos);
}

TEST_CASE("fp8 quantize: the flat destination (Q) is the identity slot mapping with one slot per block") {
    const int64_t tokens = 5, heads = 2, dim = 16, src_token_stride = 48, dst_token_stride = 40, dst_head_stride = 17;
    std::vector<uint16_t> src(tokens * src_token_stride, float_to_bf16(NAN));  // gaps are never read
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < dim; ++d) src[t * src_token_stride + h * dim + d] = float_to_bf16(normal(rng));
    src[2 * src_token_stride + dim + 1] = float_to_bf16(INFINITY);
    src[4 * src_token_stride + 3] = float_to_bf16(-1e6f);  // saturates
    const float scale = 0.01f;
    constexpr uint8_t kPoison = 0xA5;
    std::vector<uint8_t> dst(tokens * dst_token_stride + 8, kPoison);
    QuantizeReport report;
    REQUIRE(quantize_flat_reference(src.data(), tokens, heads, dim, src_token_stride, dim, scale, dst_token_stride,
                                    dst_head_stride, dst.data(), &report)
                .empty());
    CHECK(report.nonfinite == 1);
    CHECK(report.first_nonfinite == (2 * heads + 1) * dim + 1);
    CHECK(report.saturated >= 1);
    int64_t written = 0;
    for (size_t i = 0; i < dst.size(); ++i) {
        const int64_t t = static_cast<int64_t>(i) / dst_token_stride, in_token = static_cast<int64_t>(i) % dst_token_stride;
        const int64_t h = in_token / dst_head_stride, d = in_token % dst_head_stride;
        CAPTURE(i);
        if (t < tokens && h < heads && d < dim) {
            bool flagged = false;
            CHECK(dst[i] == e4m3_quantize(bf16_to_float(src[t * src_token_stride + h * dim + d]), 1.0f / scale, &flagged));
            ++written;
        } else {
            CHECK(dst[i] == kPoison);  // gaps and the tail are never written
        }
    }
    CHECK(written == tokens * heads * dim);
    // The same through the paged entry point: slot_mapping NULL, block_size 1.
    CacheLayout layout{tokens, 1, dst_token_stride, dst_token_stride, dst_head_stride};
    std::vector<uint8_t> paged(dst.size(), kPoison);
    REQUIRE(quantize_to_cache_reference(src.data(), tokens, heads, dim, src_token_stride, dim, nullptr, scale, layout,
                                        paged.data(), &report)
                .empty());
    CHECK(paged == dst);
    layout.num_blocks = tokens - 1;
    CHECK(quantize_to_cache_reference(src.data(), tokens, heads, dim, src_token_stride, dim, nullptr, scale, layout,
                                      paged.data(), &report)
              .find("tokens=5 do not fit in the cache (4 slots)") != std::string::npos);
}

TEST_CASE("fp8 quantize: the transposed V layout interleaves each 16-slot group into the P V key order") {
    // Position 4t + 2a + b of a group holds slot 8a + 2t + b: lane t's score columns 2t, 2t + 1 of
    // quad a (the A fragment of an FP8 P V: fp8/hopper_e4m3pv_d512/NOTES.md).
    const int32_t expected[kVGroupSlots] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
    for (int32_t position = 0; position < kVGroupSlots; ++position) {
        CHECK(v_position_slot(position) == expected[position]);
        CHECK(v_slot_position(expected[position]) == position);
    }
    for (int32_t slot = 0; slot < 4 * kVGroupSlots; ++slot) {
        CHECK(v_position_slot(v_slot_position(slot)) == slot);
        CHECK(v_slot_position(slot) / kVGroupSlots == slot / kVGroupSlots);  // never leaves its group
    }

    const int64_t tokens = 40, heads = 2, dim = 24, block_size = 32, num_blocks = 3;
    std::vector<uint16_t> src(tokens * heads * dim);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (auto& x : src) x = float_to_bf16(normal(rng));
    std::vector<int64_t> slots(tokens);
    for (int64_t t = 0; t < tokens; ++t) slots[t] = (t * 37 + 5) % (num_blocks * block_size);
    slots[11] = -1;
    const float scale = 0.25f;
    CacheLayout engine;
    engine.num_blocks = num_blocks;
    engine.block_size = block_size;
    engine.head_stride = dim;
    engine.slot_stride = heads * dim;
    engine.block_stride = block_size * heads * dim;
    CacheLayout transposed = engine;
    transposed.v_transposed = true;
    transposed.slot_stride = 0;  // unused
    transposed.head_stride = dim * block_size + 16;  // padded page rows
    transposed.block_stride = heads * transposed.head_stride;
    std::vector<uint8_t> want(num_blocks * engine.block_stride, 0xAA), got(num_blocks * transposed.block_stride, 0xAA);
    QuantizeReport report;
    REQUIRE(quantize_to_cache_reference(src.data(), tokens, heads, dim, heads * dim, dim, slots.data(), scale, engine,
                                        want.data(), &report)
                .empty());
    REQUIRE(quantize_to_cache_reference(src.data(), tokens, heads, dim, heads * dim, dim, slots.data(), scale,
                                        transposed, got.data(), &report)
                .empty());
    int64_t compared = 0, wrong = 0;
    for (int64_t block = 0; block < num_blocks; ++block)
        for (int32_t slot = 0; slot < block_size; ++slot)
            for (int64_t h = 0; h < heads; ++h)
                for (int32_t d = 0; d < dim; ++d, ++compared)
                    wrong += want[block * engine.block_stride + slot * engine.slot_stride + h * engine.head_stride +
                                  d] != got[v_transposed_offset(block, slot, h, d, transposed.block_stride,
                                                                 transposed.head_stride, block_size)];
    CHECK(compared == num_blocks * block_size * heads * dim);
    CHECK(wrong == 0);
    CHECK(got[dim * block_size] == 0xAA);  // the padding after a page row's head is never written

    CacheLayout odd = transposed;
    odd.block_size = 24;
    CHECK(quantize_to_cache_reference(src.data(), tokens, heads, dim, heads * dim, dim, slots.data(), scale, odd,
                                      got.data(), &report)
              .find("block_size=24 is not a multiple of 16") != std::string::npos);
}
