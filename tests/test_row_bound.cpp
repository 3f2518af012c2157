// test_row_bound.cpp - the bounded form's rule (wgmma_bf16c2mb_d512; kernels/hopper/bf16c2_d512/
// row_bound.h) on the CPU: for 32-key score tiles split into two CTAs' partials, with large,
// tiny, infinite and NaN partials and masked keys, wherever the bound of the two partial row
// maxima says no growth, the free form's exact test (tile max of the masked sums > running max +
// threshold) must say no growth either; both CTAs must compute the same bound; and the tiles must
// take both branches, so the check is not vacuous.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/hopper/bf16c2_d512/row_bound.h"

using namespace wideattn::hopper::bf16c2;

namespace {

constexpr int kTileKeys = 32;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// fmaxf from -inf over n values, as the kernel's reductions (NaN is skipped, never returned).
float reduce_max(const float* v, int n) {
    float m = -kInf;
    for (int i = 0; i < n; ++i) m = std::fmax(m, v[i]);
    return m;
}

bool same_bits(float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y || (std::isnan(a) && std::isnan(b));
}

// One partial score of a chosen kind.
float draw(std::mt19937& rng, int kind) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> special(0, 7);
    switch (kind) {
        case 0: return normal(rng);
        case 1: return 40.0f * normal(rng);                 // Gemma-scale scores with outliers
        case 2: return 1e30f * normal(rng);                 // sums that round coarsely
        case 3: return 1e-30f * normal(rng);                // tiny, subnormal sums
        default:
            switch (special(rng)) {
                case 0: return kInf;
                case 1: return -kInf;
                case 2: return kNaN;
                case 3: return 0.0f;
                case 4: return -0.0f;
                default: return normal(rng);
            }
    }
}

}  // namespace

TEST_CASE("wgmma_bf16c2mb_d512 row bound: no growth by the bound means no growth by the exact maxima") {
    std::mt19937 rng(20261205);
    std::uniform_int_distribution<int> kind_of(0, 4), mask_of(0, 3), key_of(0, kTileKeys);
    int64_t short_path = 0, exact_path = 0, checked = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const int kind_a = kind_of(rng), kind_b = kind_of(rng);
        float a[kTileKeys], b[kTileKeys], sums[kTileKeys];
        for (int k = 0; k < kTileKeys; ++k) {
            a[k] = draw(rng, kind_a);
            b[k] = draw(rng, kind_b);
            sums[k] = a[k] + b[k];
        }
        // Masked keys (a causal edge, kv_end) are -inf in the sums, not in the partials.
        const int mask = mask_of(rng);
        const int edge = key_of(rng);
        for (int k = 0; k < kTileKeys; ++k)
            if ((mask == 1 && k >= edge) || (mask == 2 && k < edge) || (mask == 3)) sums[k] = -kInf;
        const float tile_max = reduce_max(sums, kTileKeys);
        const float max_a = reduce_max(a, kTileKeys), max_b = reduce_max(b, kTileKeys);
        const float bound = row_max_bound(max_a, max_b);
        CHECK(same_bits(bound, row_max_bound(max_b, max_a)));

        std::normal_distribution<float> normal(0.0f, 4.0f);
        const float running[] = {-kInf, tile_max, std::nextafter(tile_max, kInf), std::nextafter(tile_max, -kInf),
                                 bound, std::nextafter(bound, kInf), std::nextafter(bound, -kInf), normal(rng), kInf};
        for (const float threshold : {0.0f, 8.0f})
            for (const float m : running) {
                if (std::isnan(m)) continue;  // a running maximum is never NaN (fmaxf)
                const bool exact_grows = tile_max > m + threshold;
                if (!bound_allows_growth(bound, m, threshold)) {
                    ++short_path;
                    CAPTURE(trial);
                    CAPTURE(tile_max);
                    CAPTURE(bound);
                    CAPTURE(m);
                    REQUIRE_FALSE(exact_grows);
                } else {
                    ++exact_path;
                }
                ++checked;
            }
    }
    CHECK(short_path > checked / 10);
    CHECK(exact_path > checked / 10);
}

TEST_CASE("wgmma_bf16c2mb_d512 row bound: a NaN bound and an empty tile") {
    // +inf and -inf partials of one key sum to NaN and leave a NaN bound when the other CTA's
    // maximum is -inf: the short path must not be taken.
    CHECK(bound_allows_growth(row_max_bound(kInf, -kInf), 0.0f, 0.0f));
    CHECK(bound_allows_growth(row_max_bound(kNaN, 1.0f), 1e30f, 0.0f));
    // A tile whose partials are all -inf cannot grow anything, not even a -inf running maximum.
    CHECK_FALSE(bound_allows_growth(row_max_bound(-kInf, -kInf), -kInf, 0.0f));
    // A finite bound above a -inf running maximum (the first tile of a row) may grow it.
    CHECK(bound_allows_growth(row_max_bound(0.5f, 0.25f), -kInf, 0.0f));
}
