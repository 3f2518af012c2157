// test_decode_kfv_scale.cpp - the K scale of decode_e4m3kfv_d512 (fp8/decode_e4m3kfv_d512/traits.h,
// k_shift): one power of two per block puts every K value rebuilt from an e4m3 V with the block's
// v_scale and k_norm weight below f16's largest finite value, and each rounding step of
// kernels/common/k_from_v.h commutes with it (the kernel's K is the reference's K times 2^-shift,
// exactly), on the host with the functions the kernel calls.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fp8/codec/e4m3.h"
#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/k_from_v.h"
#include "tools/harness/problem.h"

using namespace wideattn;

namespace {

using Traits = DecodeE4m3KfvD512Traits;
constexpr float kF16Max = 65504.0f;
constexpr int32_t kHeadDim = Traits::kHeadDim;
constexpr float kTheta = 1.0e6f;
constexpr int32_t kAngleSweep = 2000;  // positions 0.. at frequency 0 (1 rad a step): every angle's neighbourhood

// The largest finite |w|, as the kernel reduces it.
float finite_amax(const std::vector<float>& w) {
    float m = 0.0f;
    for (float x : w)
        if (std::fabs(x) <= FLT_MAX) m = std::max(m, std::fabs(x));
    return m;
}

// K of dim d (d < D/2: the first of its pair) from the codes' values of d and d + D/2.
float rebuilt_k(float code_value, float partner_value, float v_scale, float w, float w_partner, int32_t position,
                float inv_freq) {
    const float x = k_from_v_scaled(code_value * v_scale, w);
    const float partner = k_from_v_scaled(partner_value * v_scale, w_partner);
    const RopeCosSin cs = inv_freq != 0.0f ? rope_cos_sin(rope_angle(position, inv_freq)) : RopeCosSin{1.0f, 0.0f};
    return rope_rotate(x, partner, cs, true);
}

}  // namespace

TEST_CASE("decode_e4m3kfv_d512 K scale: every rebuilt K below f16's maximum, and 2^-shift times the reference's") {
    std::vector<std::vector<float>> weights = {random_k_norm_weights(kHeadDim, 7)};
    weights.push_back(weights[0]);
    weights.back()[3] = -40.0f;  // one outlier channel sets the bound
    weights.push_back(std::vector<float>(kHeadDim, 1e-3f));
    const float v_scales[] = {1.0f, 0.37f, -0.37f, 0x1p-10f, 3.1e5f, 1e-12f};
    const float codes[] = {fp8::kE4m3Max, -fp8::kE4m3Max, 240.0f, 1.75f, 0x1p-9f, 0.0f};
    for (const std::vector<float>& w : weights) {
        const float w_amax = finite_amax(w);
        const auto top = static_cast<int32_t>(std::max_element(w.begin(), w.end(), [](float a, float b) {
                                                  return std::fabs(a) < std::fabs(b);
                                              }) - w.begin());
        const int32_t first = top % (kHeadDim / 2);  // the pair of the largest |w|
        for (const float v_scale : v_scales) {
            CAPTURE(v_scale);
            CAPTURE(w_amax);
            const int32_t shift = Traits::k_shift(v_scale, w_amax);
            const float scaled = std::ldexp(v_scale, -shift);
            float largest = 0.0f;
            for (const float code : codes)
                for (const float partner : codes)
                    for (int32_t position = 0; position < kAngleSweep; ++position) {
                        const float inv_freq = rope_inv_freq(kTheta, 0, kHeadDim, kHeadDim);
                        const float want = rebuilt_k(code, partner, v_scale, w[first], w[first + kHeadDim / 2],
                                                     position, inv_freq);
                        const float got = rebuilt_k(code, partner, scaled, w[first], w[first + kHeadDim / 2],
                                                    position, inv_freq);
                        largest = std::max(largest, std::fabs(got));
                        if (std::fabs(want) >= FLT_MIN * 0x1p24f && std::fabs(want) <= FLT_MAX) {
                            CHECK(got == std::ldexp(want, -shift));
                        }
                    }
            CHECK(largest < kF16Max);
            CHECK(largest < std::ldexp(1.0f, Traits::kKTopLog2 + 1));
            // The bound is within 2x of what the worst codes reach (448 on the largest |w|, at an angle
            // near pi/4 over the sweep): the scale wastes at most about two bits of f16's range.
            CHECK(largest >= std::ldexp(1.0f, Traits::kKTopLog2 - 2));
        }
    }
}

TEST_CASE("decode_e4m3kfv_d512 K scale: the shift of zero, non-finite and extreme bounds") {
    CHECK(Traits::k_shift(0.0f, 1.0f) == 0);
    CHECK(Traits::k_shift(1.0f, 0.0f) == 0);
    CHECK(Traits::k_shift(INFINITY, 1.0f) == 0);
    CHECK(Traits::k_shift(NAN, 1.0f) == 0);
    CHECK(Traits::k_shift(1.0f, FLT_MAX) == 0);  // the bound overflows fp32
    CHECK(Traits::k_shift(-2.0f, 1.0f) == Traits::k_shift(2.0f, 1.0f));
    // 2 x 448 x v_scale x w_amax = 2^14 exactly: no shift; one more power of two: one.
    CHECK(Traits::k_shift(16384.0f / Traits::kKBoundFactor, 1.0f) == 0);
    CHECK(Traits::k_shift(32768.0f / Traits::kKBoundFactor, 1.0f) == 1);
    CHECK(Traits::k_shift(1e30f, 1e4f) == Traits::kQShiftLimit);  // a bound of 2^123
    CHECK(Traits::k_shift(1e-30f, 1e-8f) == -Traits::kQShiftLimit);
}
