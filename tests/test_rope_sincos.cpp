// test_rope_sincos.cpp - rope_cos_sin_reduced (kernels/common/k_from_v.h), the cos / sin of RoPE
// angles with a range reduction of its own, against cos / sin in fp64 on the angles a model makes
// (every position below 2^18 at Gemma 4's global-layer frequencies and a sample of theta 10000's),
// and its fallback to rope_cos_sin past kRopeReducedMaxAngle and on non-finite angles.
//
// The fp32 bound is 2 ulps of the correctly rounded fp32 value, relative everywhere: no absolute
// term, since near the zeros of cos / sin an error that is small against 1 still moves the bf16 of
// a small value. The bf16 values must equal the correctly rounded bf16 except where the exact value
// lies within kNearTie of a bf16 rounding boundary, where any 2-ulp fp32 error may cross it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/k_from_v.h"

using namespace wideattn;

namespace {

constexpr int32_t kPositions = 262144;  // 2^18: Gemma 4's longest context
constexpr double kMaxUlps = 2.0;
constexpr double kNearTie = 0x1p-21;  // relative distance to a bf16 rounding boundary
constexpr double kPi = 3.14159265358979323846;

// Gemma 4's global layers: theta 1e6, head_dim 512, 128 rotated dims (64 frequencies).
constexpr float kGemmaTheta = 1.0e6f;
constexpr int32_t kGemmaHeadDim = 512, kGemmaRotaryDims = 128;
// Every dim rotated at theta 10000, head_dim 512: every 8th of its 256 frequencies.
constexpr float kClassicTheta = 1.0e4f;
constexpr int32_t kClassicHeadDim = 512, kClassicStride = 8;

uint32_t bits_of(float x) {
    uint32_t word;
    std::memcpy(&word, &x, sizeof word);
    return word;
}

// The spacing of fp32 values at |x| (the value's own binade; the smallest subnormal below FLT_MIN).
double ulp_f32(double x) {
    const double ax = std::fabs(x);
    if (ax < FLT_MIN) return std::ldexp(1.0, -149);
    int exponent;
    std::frexp(ax, &exponent);  // ax in [2^(exponent-1), 2^exponent)
    return std::ldexp(1.0, exponent - 24);
}

// Whether x lies within kNearTie (relative) of a bf16 rounding boundary: a midpoint between two
// neighbouring bf16 values, an odd multiple of half their spacing.
bool near_bf16_boundary(double x) {
    const double ax = std::fabs(x);
    if (ax == 0.0) return false;
    int exponent;
    std::frexp(ax, &exponent);
    const double half_spacing = std::ldexp(1.0, exponent - 9);  // bf16 keeps 8 significant bits
    const double units = ax / half_spacing;
    const double odd = 2.0 * std::floor(units / 2.0) + 1.0;
    return std::fabs(ax - odd * half_spacing) <= kNearTie * ax;
}

struct Tally {
    int64_t angles = 0;
    double max_ulps_c = 0.0, max_ulps_s = 0.0;  // against the correctly rounded fp32 values
    double max_exact_ulps = 0.0;                // against the fp64 values (ulps of theirs)
    float worst_c = 0.0f, worst_s = 0.0f;  // the angles of the largest errors
    int64_t near_ties = 0;                 // values within kNearTie of a bf16 boundary
    int64_t near_tie_mismatches = 0;       // bf16 differing there (allowed)
    int64_t mismatches = 0;                // bf16 differing elsewhere (none allowed)
    float first_mismatch = 0.0f;

    // One value: the fp32 result and its bf16 against the exact value.
    void value(float got, float got_bf16, double exact, float angle, double& max_ulps, float& worst) {
        const float want = static_cast<float>(exact);
        const double ulps = std::fabs(static_cast<double>(got) - want) / ulp_f32(want);
        max_exact_ulps = std::max(max_exact_ulps, std::fabs(got - exact) / ulp_f32(exact));
        if (ulps > max_ulps) {
            max_ulps = ulps;
            worst = angle;
        }
        const bool near = near_bf16_boundary(exact);
        near_ties += near;
        if (got_bf16 != round_to_bf16(want)) {
            if (near) {
                ++near_tie_mismatches;
            } else if (mismatches++ == 0) {
                first_mismatch = angle;
            }
        }
    }

    void angle(float a) {
        float c, s;
        rope_cos_sin_reduced_f32(a, &c, &s);
        const RopeCosSin cs = rope_cos_sin_reduced(a);
        const double ad = a;
        value(c, cs.c, std::cos(ad), a, max_ulps_c, worst_c);
        value(s, cs.s, std::sin(ad), a, max_ulps_s, worst_s);
        ++angles;
    }

    void check() const {
        CAPTURE(angles);
        CAPTURE(worst_c);
        CAPTURE(worst_s);
        CAPTURE(first_mismatch);
        MESSAGE("max error over ", angles, " angles: cos ", max_ulps_c, " ulps, sin ", max_ulps_s,
                " ulps (", max_exact_ulps, " ulps of the fp64 value); bf16 mismatches at near-ties: ",
                near_tie_mismatches, " of ", near_ties, " near-ties");
        CHECK(max_ulps_c <= kMaxUlps);
        CHECK(max_ulps_s <= kMaxUlps);
        CHECK(mismatches == 0);
    }
};

std::vector<float> model_inv_freqs() {
    std::vector<float> inv_freq;
    for (int32_t i = 0; i < kGemmaRotaryDims / 2; ++i)
        inv_freq.push_back(rope_inv_freq(kGemmaTheta, i, kGemmaHeadDim, kGemmaRotaryDims));
    for (int32_t i = 0; i < kClassicHeadDim / 2; i += kClassicStride)
        inv_freq.push_back(rope_inv_freq(kClassicTheta, i, kClassicHeadDim, kClassicHeadDim));
    return inv_freq;
}

// The same bits as rope_cos_sin (the fallback), NaN included.
void check_same_as_fallback(float angle) {
    CAPTURE(angle);
    const RopeCosSin got = rope_cos_sin_reduced(angle), want = rope_cos_sin(angle);
    CHECK(bits_of(got.c) == bits_of(want.c));
    CHECK(bits_of(got.s) == bits_of(want.s));
}

}  // namespace

TEST_CASE("rope_cos_sin_reduced: every position below 2^18 at the models' frequencies, against fp64") {
    Tally tally;
    for (const float inv_freq : model_inv_freqs())
        for (int32_t position = 0; position < kPositions; ++position) tally.angle(rope_angle(position, inv_freq));
    tally.check();
}

TEST_CASE("rope_cos_sin_reduced: negative, tiny and edge angles, against fp64") {
    Tally tally;
    // Negative angles are the mirror image: cos even, sin odd, bit for bit.
    for (const float inv_freq : model_inv_freqs())
        for (int32_t position = 1; position < kPositions; position += 97) {
            const float a = rope_angle(position, inv_freq);
            tally.angle(-a);
            const RopeCosSin plus = rope_cos_sin_reduced(a), minus = rope_cos_sin_reduced(-a);
            CHECK(bits_of(minus.c) == bits_of(plus.c));
            CHECK(bits_of(minus.s) == bits_of(-plus.s));
        }
    const float tiny[] = {std::numeric_limits<float>::denorm_min(), FLT_MIN, 1e-30f, 1e-10f, 0x1p-12f};
    for (const float a : tiny) {
        tally.angle(a);
        tally.angle(-a);
        CHECK(rope_cos_sin_reduced(a).c == 1.0f);
        CHECK(rope_cos_sin_reduced(a).s == round_to_bf16(a));
    }
    tally.angle(0.0f);
    CHECK(rope_cos_sin_reduced(0.0f).c == 1.0f);
    CHECK(bits_of(rope_cos_sin_reduced(0.0f).s) == 0u);
    // The reduced path's last angles, and near them the multiples of pi/4: zeros of cos / sin (the
    // smallest reduced arguments) and the quadrants' boundaries (the largest).
    float a = kRopeReducedMaxAngle;
    for (int32_t step = 0; step < 4096; ++step, a = std::nextafter(a, 0.0f)) {
        tally.angle(a);
        tally.angle(-a);
    }
    constexpr int32_t kLastMultiple = 333772;  // of pi/4 below 2^18
    for (int32_t m = kLastMultiple; m > kLastMultiple - 8192; --m) {
        const float multiple = static_cast<float>(m * (kPi / 4.0));
        tally.angle(std::nextafter(multiple, 0.0f));
        tally.angle(multiple);
        tally.angle(std::nextafter(multiple, FLT_MAX));
    }
    tally.check();
}

TEST_CASE("rope_cos_sin_reduced: rope_cos_sin's bits past kRopeReducedMaxAngle and on inf / NaN") {
    const float above = std::nextafter(kRopeReducedMaxAngle, FLT_MAX);
    const float past[] = {above, -above, 262145.0f, 1.0e6f, 3.0e7f, 1.0e30f, FLT_MAX, -FLT_MAX,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()};
    for (const float angle : past) check_same_as_fallback(angle);
    CHECK(std::isnan(rope_cos_sin_reduced(std::numeric_limits<float>::infinity()).c));
    CHECK(std::isnan(rope_cos_sin_reduced(std::numeric_limits<float>::quiet_NaN()).s));
}
