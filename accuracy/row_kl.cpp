// row_kl.cpp - see row_kl.h. The two hot loops (scan and exp-accumulate) use GCC/Clang vector
// extensions so they vectorise on any target (SSE2, NEON) without -ffast-math, and on x86-64
// GCC also builds an x86-64-v3 (AVX2+FMA) clone chosen at load time.
#include "accuracy/row_kl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDEATTN_HOT_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define WIDEATTN_HOT_LOOP
#endif
#define WIDEATTN_ALWAYS_INLINE inline __attribute__((always_inline))

// The 32-byte vector helpers are always inlined, so the ABI note GCC gives for passing them by
// value without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace wideattn::accuracy {
namespace {

constexpr int kLanes = 4;
typedef double Doubles __attribute__((vector_size(kLanes * sizeof(double))));
typedef int64_t Int64s __attribute__((vector_size(kLanes * sizeof(int64_t))));
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Int32s __attribute__((vector_size(kLanes * sizeof(int32_t))));

constexpr uint32_t kExponentMask = 0x7f800000u;
constexpr uint32_t kNegativeInfinityBits = 0xff800000u;
// Columns per argmax block: the scan records each block's max, then looks for the first
// column equal to the row max inside the best block only.
constexpr int64_t kArgmaxBlock = 256;

// exp(x) for x <= 0 to about 1 ulp: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2
// so k * kLn2High is exact), a degree-13 Taylor polynomial for exp(r) (truncation < 5e-18)
// evaluated with Estrin's scheme (short dependency chains), and 2^k built from the bits of the
// rounding constant. Inputs below kExpFloor are clamped: such terms contribute < 1e-307 to
// sums that are >= 1.
constexpr double kExpFloor = -708.0;
constexpr double kLog2E = 1.4426950408889634074;
constexpr double kLn2High = 6.93147180369123816490e-01;
constexpr double kLn2Low = 1.90821492927058770002e-10;
constexpr double kRoundingShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
constexpr double kC0 = 1.0, kC1 = 1.0, kC2 = 1.0 / 2, kC3 = 1.0 / 6, kC4 = 1.0 / 24, kC5 = 1.0 / 120,
                 kC6 = 1.0 / 720, kC7 = 1.0 / 5040, kC8 = 1.0 / 40320, kC9 = 1.0 / 362880,
                 kC10 = 1.0 / 3628800, kC11 = 1.0 / 39916800, kC12 = 1.0 / 479001600,
                 kC13 = 1.0 / 6227020800;
constexpr int64_t kDoubleExponentBias = 1023;
constexpr int kDoubleMantissaBits = 52;

WIDEATTN_ALWAYS_INLINE Doubles exp_nonpositive(Doubles x) {
    const Doubles floor = Doubles{} + kExpFloor;
    x = x < floor ? floor : x;
    const Doubles shifted = x * kLog2E + kRoundingShift;
    const Doubles k = shifted - kRoundingShift;
    const Doubles r = (x - k * kLn2High) - k * kLn2Low;
    const Doubles r2 = r * r;
    const Doubles r4 = r2 * r2;
    const Doubles r8 = r4 * r4;
    const Doubles low = (kC0 + kC1 * r + (kC2 + kC3 * r) * r2) + (kC4 + kC5 * r + (kC6 + kC7 * r) * r2) * r4;
    const Doubles high = (kC8 + kC9 * r + (kC10 + kC11 * r) * r2) + (kC12 + kC13 * r) * r4;
    const Doubles p = low + high * r8;
    Int64s bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    const Int64s scale_bits = (bits + kDoubleExponentBias) << kDoubleMantissaBits;
    Doubles scale;
    std::memcpy(&scale, &scale_bits, sizeof scale);
    return p * scale;
}

WIDEATTN_ALWAYS_INLINE Doubles load_doubles(const float* source) {
    Floats values;
    std::memcpy(&values, source, sizeof values);
    return __builtin_convertvector(values, Doubles);
}

WIDEATTN_ALWAYS_INLINE double lane_sum(Doubles v) {
    double total = 0.0;
    for (int lane = 0; lane < kLanes; ++lane) total += v[lane];
    return total;
}

struct Sums {
    double ref_exp = 0.0;        // sum exp(ref - ref_max)
    double cand_exp = 0.0;       // sum exp(cand - cand_max)
    double weighted_diff = 0.0;  // sum exp(ref - ref_max) * ((ref - ref_max) - (cand - cand_max))
};

// Both rows finite. Two vectors of each row per step give independent dependency chains.
WIDEATTN_HOT_LOOP Sums sums_finite(const float* ref, const float* cand, int64_t vocab, double ref_max,
                                   double cand_max) {
    Doubles ref_exp0 = {}, ref_exp1 = {}, cand_exp0 = {}, cand_exp1 = {}, weighted0 = {}, weighted1 = {};
    const int64_t step = 2 * kLanes;
    int64_t i = 0;
    for (; i + step <= vocab; i += step) {
        const Doubles a0 = load_doubles(ref + i) - ref_max;
        const Doubles a1 = load_doubles(ref + i + kLanes) - ref_max;
        const Doubles b0 = load_doubles(cand + i) - cand_max;
        const Doubles b1 = load_doubles(cand + i + kLanes) - cand_max;
        const Doubles ea0 = exp_nonpositive(a0);
        const Doubles ea1 = exp_nonpositive(a1);
        cand_exp0 += exp_nonpositive(b0);
        cand_exp1 += exp_nonpositive(b1);
        ref_exp0 += ea0;
        ref_exp1 += ea1;
        weighted0 += ea0 * (a0 - b0);
        weighted1 += ea1 * (a1 - b1);
    }
    Sums sums;
    sums.ref_exp = lane_sum(ref_exp0 + ref_exp1);
    sums.cand_exp = lane_sum(cand_exp0 + cand_exp1);
    sums.weighted_diff = lane_sum(weighted0 + weighted1);
    for (; i < vocab; ++i) {
        const Doubles a = Doubles{} + (static_cast<double>(ref[i]) - ref_max);
        const Doubles b = Doubles{} + (static_cast<double>(cand[i]) - cand_max);
        const double ea = exp_nonpositive(a)[0];
        sums.ref_exp += ea;
        sums.cand_exp += exp_nonpositive(b)[0];
        sums.weighted_diff += ea * (a[0] - b[0]);
    }
    return sums;
}

// A row with -inf logits: zero-probability terms are skipped; sets *infinite when the candidate
// gives probability zero to a token the reference does not. Rare, so scalar.
Sums sums_with_zeros(const float* ref, const float* cand, int64_t vocab, double ref_max, double cand_max,
                     bool* infinite) {
    Sums sums;
    *infinite = false;
    for (int64_t i = 0; i < vocab; ++i) {
        const bool ref_zero = std::isinf(ref[i]);
        const bool cand_zero = std::isinf(cand[i]);
        const double b = cand_zero ? 0.0 : static_cast<double>(cand[i]) - cand_max;
        if (!cand_zero) sums.cand_exp += std::exp(b);
        if (ref_zero) continue;
        const double a = static_cast<double>(ref[i]) - ref_max;
        const double ea = std::exp(a);
        sums.ref_exp += ea;
        if (cand_zero) {
            *infinite = true;
        } else {
            sums.weighted_diff += ea * (a - b);
        }
    }
    return sums;
}

struct BlockMax {
    float max;
    bool any_special;  // some element has an all-ones exponent (inf or NaN)
};

// Max (ignoring NaN) and inf/NaN detection over [begin, end), vectorised.
WIDEATTN_HOT_LOOP BlockMax block_max(const float* row, int64_t begin, int64_t end) {
    const float lowest = -std::numeric_limits<float>::infinity();
    Floats best = Floats{} + lowest;
    Int32s special = {};
    const Int32s exponent_mask = Int32s{} + static_cast<int32_t>(kExponentMask);
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
        Floats values;
        std::memcpy(&values, row + i, sizeof values);
        Int32s bits;
        std::memcpy(&bits, row + i, sizeof bits);
        special |= (bits & exponent_mask) == exponent_mask;
        best = values > best ? values : best;
    }
    BlockMax result{lowest, false};
    for (int lane = 0; lane < kLanes; ++lane) {
        result.max = std::max(result.max, best[lane]);
        result.any_special = result.any_special || special[lane] != 0;
    }
    for (; i < end; ++i) {
        uint32_t bits;
        std::memcpy(&bits, row + i, sizeof bits);
        result.any_special = result.any_special || (bits & kExponentMask) == kExponentMask;
        if (row[i] > result.max) result.max = row[i];
    }
    return result;
}

}  // namespace

const char* row_problem_name(RowProblem problem) {
    switch (problem) {
        case RowProblem::kNone: return "none";
        case RowProblem::kNaN: return "NaN";
        case RowProblem::kPositiveInfinity: return "+inf";
        case RowProblem::kAllNegativeInfinity: return "all logits -inf";
    }
    return "unknown";
}

RowScan scan_row(const float* row, int64_t vocab) {
    RowScan scan;
    float best = -std::numeric_limits<float>::infinity();
    int64_t best_block = -1;
    bool any_special = false;
    for (int64_t begin = 0; begin < vocab; begin += kArgmaxBlock) {
        const BlockMax block = block_max(row, begin, std::min(vocab, begin + kArgmaxBlock));
        any_special = any_special || block.any_special;
        if (block.max > best) {
            best = block.max;
            best_block = begin;
        }
    }
    if (any_special) {
        for (int64_t i = 0; i < vocab; ++i) {
            uint32_t bits;
            std::memcpy(&bits, row + i, sizeof bits);
            if ((bits & kExponentMask) != kExponentMask) continue;
            if (bits == kNegativeInfinityBits) {
                scan.has_negative_infinity = true;
                continue;
            }
            scan.problem = std::isnan(row[i]) ? RowProblem::kNaN : RowProblem::kPositiveInfinity;
            scan.problem_column = i;
            return scan;
        }
    }
    if (best_block < 0) {
        scan.problem = RowProblem::kAllNegativeInfinity;
        scan.problem_column = 0;
        return scan;
    }
    scan.max = best;
    for (int64_t i = best_block; i < vocab; ++i) {
        if (row[i] == best) {
            scan.argmax = i;
            break;
        }
    }
    return scan;
}

RowPairDrift row_pair_drift(const float* ref, const float* cand, int64_t vocab, const RowScan& ref_scan,
                            const RowScan& cand_scan) {
    const double ref_max = ref_scan.max;
    const double cand_max = cand_scan.max;
    bool infinite = false;
    const Sums sums = ref_scan.has_negative_infinity || cand_scan.has_negative_infinity
                          ? sums_with_zeros(ref, cand, vocab, ref_max, cand_max, &infinite)
                          : sums_finite(ref, cand, vocab, ref_max, cand_max);
    RowPairDrift drift;
    const double log_ref_exp = std::log(sums.ref_exp);
    const double log_cand_exp = std::log(sums.cand_exp);
    drift.ref_log_normalizer = ref_max + log_ref_exp;
    drift.cand_log_normalizer = cand_max + log_cand_exp;
    // KL = sum p (log p - log q) = sum p (a - b) - log S_ref + log S_cand with a, b the
    // max-shifted logits and p = exp(a) / S_ref.
    drift.kl = infinite ? std::numeric_limits<double>::infinity()
                        : sums.weighted_diff / sums.ref_exp - log_ref_exp + log_cand_exp;
    return drift;
}

}  // namespace wideattn::accuracy
