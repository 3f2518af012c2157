// row_kl.cpp - see row_kl.h. The block scan and a portable exp pass use GCC/Clang vector
// extensions so they vectorise on any target (SSE2, NEON) without -ffast-math (on x86-64 GCC
// also builds an x86-64-v3 clone of the scan); on x86-64 CPUs with AVX2 and FMA, chosen at run
// time, the exact path's exp pass is an intrinsics loop that keeps every constant and sum in
// registers, and the conditioned form (conditioned_row_drift, tried first) runs.
#include "accuracy/row_kl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WIDEATTN_HAVE_AVX2_PATH 1
#define WIDEATTN_AVX2 __attribute__((target("avx2,fma")))
#endif

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
typedef uint64_t Bits64s __attribute__((vector_size(kLanes * sizeof(uint64_t))));

constexpr uint32_t kExponentMask = 0x7f800000u;
constexpr uint32_t kNegativeInfinityBits = 0xff800000u;
// Columns per argmax block: the scan records each block's max, then looks for the first
// column equal to the row max inside the best block only.
constexpr int64_t kArgmaxBlock = 256;
// Columns per block of the fused pass (both rows' blocks stay in L1).
constexpr int64_t kSumBlock = 512;
// Most a logit may exceed the shift of a block summed at the row's running max: e^600 * 512
// terms * |ref - cand| (< 2^129) stays below the double range.
constexpr double kMaxShiftExcess = 600.0;

// exp(x) for x <= 0 (and up to kMaxShiftExcess: the scale's exponent field still holds m) to
// about 1 ulp with few floating-point operations:
//   x = (256 m + j) ln2/256 + r,  |r| <= ln2/512,  exp(x) = 2^m * 2^(j/256) * exp(r),
// with 2^(j/256) from a 256-entry table (correctly rounded doubles), exp(r) - 1 from a degree-4
// Taylor polynomial (truncation < 4e-17), ln2/256 split Cody-Waite style so n * kLn2OverTableHigh
// is exact, and n recovered from the bits of the rounding constant. Inputs below kExpFloor are
// clamped: such terms contribute < 1e-307 to sums that are >= 1.
constexpr double kExpFloor = -708.0;
constexpr int kTableBits = 8;
constexpr int kTableSize = 1 << kTableBits;
constexpr double kTableSizeOverLn2 = 369.3299304675746;
constexpr double kLn2OverTableHigh = 0x1.62e42ff000000p-9;  // 32 significant bits
constexpr double kLn2OverTableLow = -1.6409824502660487e-13;
constexpr double kRoundingShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
constexpr int kDoubleMantissaBits = 52;
// Shifting the rounded value's bits left by this puts n = 256 m + j at the exponent field: m
// lands in the exponent, j just below it (the table entries have j there subtracted already).
constexpr int kScaleShift = kDoubleMantissaBits - kTableBits;
constexpr double kTaylor2 = 1.0 / 2, kTaylor3 = 1.0 / 6, kTaylor4 = 1.0 / 24;

// Bits of 2^(j / kTableSize) (correctly rounded, from long double exp2) minus j << kScaleShift,
// so that adding the rounded value's bits << kScaleShift gives the bits of 2^m * 2^(j/256).
const int64_t* exp2_fraction_table() {
    static const struct Table {
        int64_t values[kTableSize];
        Table() {
            for (int j = 0; j < kTableSize; ++j) {
                const double value = static_cast<double>(std::exp2(static_cast<long double>(j) / kTableSize));
                int64_t bits;
                std::memcpy(&bits, &value, sizeof bits);
                values[j] = bits - (static_cast<int64_t>(j) << kScaleShift);
            }
        }
    } table;
    return table.values;
}

// kClamp false: the caller guarantees x >= kExpFloor (saves the compare and blend).
template <bool kClamp>
WIDEATTN_ALWAYS_INLINE Doubles exp_nonpositive(Doubles x, const int64_t* table) {
    if (kClamp) {
        const Doubles floor = Doubles{} + kExpFloor;
        x = x < floor ? floor : x;
    }
    const Doubles shifted = x * kTableSizeOverLn2 + kRoundingShift;
    const Doubles n = shifted - kRoundingShift;
    const Doubles r = (x - n * kLn2OverTableHigh) - n * kLn2OverTableLow;
    Bits64s bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    const Bits64s j = bits & (kTableSize - 1);
    Bits64s scaled_bits = {static_cast<uint64_t>(table[j[0]]), static_cast<uint64_t>(table[j[1]]),
                           static_cast<uint64_t>(table[j[2]]), static_cast<uint64_t>(table[j[3]])};
    scaled_bits += bits << kScaleShift;
    Doubles scale;
    std::memcpy(&scale, &scaled_bits, sizeof scale);
    const Doubles q = r + (r * r) * (kTaylor2 + r * (kTaylor3 + r * kTaylor4));
    return scale + scale * q;
}

WIDEATTN_ALWAYS_INLINE double lane_sum(Doubles v) {
    double total = 0.0;
    for (int lane = 0; lane < kLanes; ++lane) total += v[lane];
    return total;
}

struct Sums {
    double ref_exp = 0.0;        // sum exp(ref - ref_max)
    double cand_exp = 0.0;       // sum exp(cand - cand_max)
    double weighted_diff = 0.0;  // sum exp(ref - ref_max) * (ref - cand)
    double ref_max = 0.0;
    double cand_max = 0.0;
    int64_t ref_argmax = -1;
    int64_t cand_argmax = -1;
};

struct BlockMax {
    float max;
    float min;
    bool any_special;  // some element has an all-ones exponent (inf or NaN)
};

// Max and min (ignoring NaN) and inf/NaN detection over [begin, end), vectorised 8 wide.
WIDEATTN_HOT_LOOP BlockMax block_max(const float* row, int64_t begin, int64_t end) {
    typedef float Floats8 __attribute__((vector_size(8 * sizeof(float))));
    typedef int32_t Int32s8 __attribute__((vector_size(8 * sizeof(int32_t))));
    constexpr int kWide = 8;
    const float lowest = -std::numeric_limits<float>::infinity();
    const float highest = std::numeric_limits<float>::infinity();
    Floats8 best = Floats8{} + lowest;
    Floats8 least = Floats8{} + highest;
    Int32s8 special = {};
    const Int32s8 exponent_mask = Int32s8{} + static_cast<int32_t>(kExponentMask);
    int64_t i = begin;
    for (; i + kWide <= end; i += kWide) {
        Floats8 values;
        std::memcpy(&values, row + i, sizeof values);
        Int32s8 bits;
        std::memcpy(&bits, row + i, sizeof bits);
        special |= (bits & exponent_mask) == exponent_mask;
        best = values > best ? values : best;
        least = values < least ? values : least;
    }
    BlockMax result{lowest, highest, false};
    for (int lane = 0; lane < kWide; ++lane) {
        result.max = std::max(result.max, best[lane]);
        result.min = std::min(result.min, least[lane]);
        result.any_special = result.any_special || special[lane] != 0;
    }
    for (; i < end; ++i) {
        uint32_t bits;
        std::memcpy(&bits, row + i, sizeof bits);
        result.any_special = result.any_special || (bits & kExponentMask) == kExponentMask;
        result.max = std::max(result.max, row[i]);
        result.min = std::min(result.min, row[i]);
    }
    return result;
}

struct BlockSums {
    double ref_exp = 0.0;   // sum exp(ref - ref_max) over the block
    double cand_exp = 0.0;  // sum exp(cand - cand_max)
    double weighted = 0.0;  // sum exp(ref - ref_max) * (ref - cand)
};

// Adds the terms of elements [begin, n), the tail after the last whole vector, with std::exp.
inline void add_tail_sums(BlockSums& sums, const float* ref, const float* cand, int64_t begin, int64_t n,
                          double ref_max, double cand_max) {
    for (int64_t i = begin; i < n; ++i) {
        const double r = ref[i], c = cand[i];
        const double ea = std::exp(r - ref_max);
        sums.ref_exp += ea;
        sums.cand_exp += std::exp(c - cand_max);
        sums.weighted += ea * (r - c);
    }
}

// Exp sums of one block (at most kSumBlock) of finite logits given each row's block max. The
// floats are first widened into double tiles by a plain loop (which vectorises to one
// conversion per vector; converting inside the exp loop made GCC round-trip through the
// stack), then one vector per step keeps accumulators and constants in registers.
template <bool kClamp>
WIDEATTN_ALWAYS_INLINE BlockSums block_sums_impl(const float* ref, const float* cand, int64_t n, double ref_max,
                                                 double cand_max) {
    alignas(32) double ref_tile[kSumBlock];
    alignas(32) double cand_tile[kSumBlock];
    for (int64_t i = 0; i < n; ++i) {
        ref_tile[i] = ref[i];
        cand_tile[i] = cand[i];
    }
    const int64_t* table = exp2_fraction_table();
    Doubles ref_exp = {}, cand_exp = {}, weighted = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        Doubles r, c;
        std::memcpy(&r, ref_tile + i, sizeof r);
        std::memcpy(&c, cand_tile + i, sizeof c);
        const Doubles ea = exp_nonpositive<kClamp>(r - ref_max, table);
        cand_exp += exp_nonpositive<kClamp>(c - cand_max, table);
        ref_exp += ea;
        weighted += ea * (r - c);
    }
    BlockSums sums;
    sums.ref_exp = lane_sum(ref_exp);
    sums.cand_exp = lane_sum(cand_exp);
    sums.weighted = lane_sum(weighted);
    add_tail_sums(sums, ref, cand, i, n, ref_max, cand_max);  // the tiles hold these floats, widened
    return sums;
}

#ifdef WIDEATTN_HAVE_AVX2_PATH
// The same exp as exp_nonpositive, on AVX2 registers with fused multiply-adds. The table is read
// with scalar loads (measured faster than vgatherqpd on the development CPU).
WIDEATTN_AVX2 inline __m256d exp_nonpositive_avx2(__m256d x, const int64_t* table) {
    const __m256d rounding_shift = _mm256_set1_pd(kRoundingShift);
    const __m256d shifted = _mm256_fmadd_pd(x, _mm256_set1_pd(kTableSizeOverLn2), rounding_shift);
    const __m256d n = _mm256_sub_pd(shifted, rounding_shift);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(kLn2OverTableHigh), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(kLn2OverTableLow), r);
    const __m256i bits = _mm256_castpd_si256(shifted);
    alignas(32) int64_t j[kLanes];
    _mm256_store_si256(reinterpret_cast<__m256i*>(j), _mm256_and_si256(bits, _mm256_set1_epi64x(kTableSize - 1)));
    const __m256i entries = _mm256_set_epi64x(table[j[3]], table[j[2]], table[j[1]], table[j[0]]);
    const __m256d scale = _mm256_castsi256_pd(_mm256_add_epi64(entries, _mm256_slli_epi64(bits, kScaleShift)));
    __m256d p = _mm256_fmadd_pd(r, _mm256_set1_pd(kTaylor4), _mm256_set1_pd(kTaylor3));
    p = _mm256_fmadd_pd(r, p, _mm256_set1_pd(kTaylor2));
    const __m256d q = _mm256_fmadd_pd(_mm256_mul_pd(r, r), p, r);
    return _mm256_fmadd_pd(scale, q, scale);
}

template <bool kClamp>
WIDEATTN_AVX2 inline BlockSums block_sums_avx2_impl(const float* ref, const float* cand, int64_t n, double ref_max,
                                                    double cand_max) {
    const int64_t* table = exp2_fraction_table();
    const __m256d ref_shift = _mm256_set1_pd(ref_max), cand_shift = _mm256_set1_pd(cand_max);
    const __m256d floor = _mm256_set1_pd(kExpFloor);
    __m256d ref_exp = _mm256_setzero_pd(), cand_exp = _mm256_setzero_pd(), weighted = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const __m256d r = _mm256_cvtps_pd(_mm_loadu_ps(ref + i));
        const __m256d c = _mm256_cvtps_pd(_mm_loadu_ps(cand + i));
        __m256d a = _mm256_sub_pd(r, ref_shift), b = _mm256_sub_pd(c, cand_shift);
        if (kClamp) {
            a = _mm256_max_pd(a, floor);
            b = _mm256_max_pd(b, floor);
        }
        const __m256d ea = exp_nonpositive_avx2(a, table);
        ref_exp = _mm256_add_pd(ref_exp, ea);
        cand_exp = _mm256_add_pd(cand_exp, exp_nonpositive_avx2(b, table));
        weighted = _mm256_fmadd_pd(ea, _mm256_sub_pd(r, c), weighted);
    }
    alignas(32) double lanes[3][kLanes];
    _mm256_store_pd(lanes[0], ref_exp);
    _mm256_store_pd(lanes[1], cand_exp);
    _mm256_store_pd(lanes[2], weighted);
    BlockSums sums;
    for (int lane = 0; lane < kLanes; ++lane) {
        sums.ref_exp += lanes[0][lane];
        sums.cand_exp += lanes[1][lane];
        sums.weighted += lanes[2][lane];
    }
    add_tail_sums(sums, ref, cand, i, n, ref_max, cand_max);
    return sums;
}

WIDEATTN_AVX2 BlockSums block_sums_avx2(const float* ref, const float* cand, int64_t n, double ref_max,
                                        double cand_max, bool need_clamp) {
    return need_clamp ? block_sums_avx2_impl<true>(ref, cand, n, ref_max, cand_max)
                      : block_sums_avx2_impl<false>(ref, cand, n, ref_max, cand_max);
}

// Sums of a block relative to shifts that are not the block's own maxima (the row's running
// maxima), with the block maxima found in the same pass: a second pass over the block for its
// max is not needed. Exponents are clamped below at kExpFloor. A NaN or infinite logit makes
// `weighted` non-finite (inf - inf, NaN or 0 * inf reaches it in every case), so the caller
// checks that instead of scanning; it also checks that no logit exceeds its shift by more than
// kMaxShiftExcess, which keeps every sum finite.
struct ShiftedBlockSums {
    BlockSums sums;
    float ref_max;
    float cand_max;
};

WIDEATTN_AVX2 ShiftedBlockSums block_sums_shifted_avx2(const float* ref, const float* cand, int64_t n,
                                                       double ref_shift, double cand_shift) {
    const int64_t* table = exp2_fraction_table();
    const __m256d ref_shifts = _mm256_set1_pd(ref_shift), cand_shifts = _mm256_set1_pd(cand_shift);
    const __m256d floor = _mm256_set1_pd(kExpFloor);
    const float lowest = -std::numeric_limits<float>::infinity();
    __m128 ref_best = _mm_set1_ps(lowest), cand_best = _mm_set1_ps(lowest);
    __m256d ref_exp = _mm256_setzero_pd(), cand_exp = _mm256_setzero_pd(), weighted = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const __m128 ref_floats = _mm_loadu_ps(ref + i), cand_floats = _mm_loadu_ps(cand + i);
        ref_best = _mm_max_ps(ref_best, ref_floats);
        cand_best = _mm_max_ps(cand_best, cand_floats);
        const __m256d r = _mm256_cvtps_pd(ref_floats), c = _mm256_cvtps_pd(cand_floats);
        const __m256d a = _mm256_max_pd(_mm256_sub_pd(r, ref_shifts), floor);
        const __m256d b = _mm256_max_pd(_mm256_sub_pd(c, cand_shifts), floor);
        const __m256d ea = exp_nonpositive_avx2(a, table);
        ref_exp = _mm256_add_pd(ref_exp, ea);
        cand_exp = _mm256_add_pd(cand_exp, exp_nonpositive_avx2(b, table));
        weighted = _mm256_fmadd_pd(ea, _mm256_sub_pd(r, c), weighted);
    }
    alignas(32) double lanes[3][kLanes];
    alignas(16) float best[2][kLanes];
    _mm256_store_pd(lanes[0], ref_exp);
    _mm256_store_pd(lanes[1], cand_exp);
    _mm256_store_pd(lanes[2], weighted);
    _mm_store_ps(best[0], ref_best);
    _mm_store_ps(best[1], cand_best);
    ShiftedBlockSums result{{}, lowest, lowest};
    for (int lane = 0; lane < kLanes; ++lane) {
        result.sums.ref_exp += lanes[0][lane];
        result.sums.cand_exp += lanes[1][lane];
        result.sums.weighted += lanes[2][lane];
        result.ref_max = std::max(result.ref_max, best[0][lane]);
        result.cand_max = std::max(result.cand_max, best[1][lane]);
    }
    for (; i < n; ++i) {
        const double r = ref[i], c = cand[i];
        const double ea = std::exp(std::max(r - ref_shift, kExpFloor));
        result.sums.ref_exp += ea;
        result.sums.cand_exp += std::exp(std::max(c - cand_shift, kExpFloor));
        result.sums.weighted += ea * (r - c);
        result.ref_max = std::max(result.ref_max, ref[i]);
        result.cand_max = std::max(result.cand_max, cand[i]);
    }
    return result;
}

bool cpu_has_avx2_fma() {
    static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return supported;
}
#endif

// need_clamp: some logit of the block lies more than -kExpFloor below its block max.
BlockSums block_sums(const float* ref, const float* cand, int64_t n, double ref_max, double cand_max,
                     bool need_clamp) {
#ifdef WIDEATTN_HAVE_AVX2_PATH
    if (cpu_has_avx2_fma()) return block_sums_avx2(ref, cand, n, ref_max, cand_max, need_clamp);
#endif
    return need_clamp ? block_sums_impl<true>(ref, cand, n, ref_max, cand_max)
                      : block_sums_impl<false>(ref, cand, n, ref_max, cand_max);
}

// Running softmax sums over blocks: the sums are kept relative to the largest block max seen
// so far and rescaled (one scalar exp per block) when a larger one arrives.
struct RunningRow {
    double max = -std::numeric_limits<double>::infinity();
    double exp_sum = 0.0;
    double weighted = 0.0;     // reference only
    int64_t max_block = -1;    // first column of the first block holding the max

    void add(double block_max, double block_exp, double block_weighted, int64_t block_begin) {
        if (block_max > max) {
            const double factor = max_block < 0 ? 0.0 : std::exp(max - block_max);
            exp_sum = exp_sum * factor + block_exp;
            weighted = weighted * factor + block_weighted;
            max = block_max;
            max_block = block_begin;
        } else {
            const double factor = std::exp(block_max - max);
            exp_sum += block_exp * factor;
            weighted += block_weighted * factor;
        }
    }

    // Block sums taken relative to the current max (not the block's): no rescaling unless the
    // block holds a new max.
    void add_at_current_max(double block_max, double block_exp, double block_weighted, int64_t block_begin) {
        if (block_max > max) {
            const double factor = std::exp(max - block_max);
            exp_sum = (exp_sum + block_exp) * factor;
            weighted = (weighted + block_weighted) * factor;
            max = block_max;
            max_block = block_begin;
        } else {
            exp_sum += block_exp;
            weighted += block_weighted;
        }
    }
};

int64_t first_index_of(const float* row, int64_t begin, int64_t vocab, float value) {
    for (int64_t i = begin; i < vocab; ++i) {
        if (row[i] == value) return i;
    }
    return -1;
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
            sums.weighted_diff += ea * (static_cast<double>(ref[i]) - static_cast<double>(cand[i]));
        }
    }
    return sums;
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

namespace {

// Sums of a row pair over all its blocks, combined with a running max.
struct RowPairSums {
    RunningRow ref;
    RunningRow cand;
    bool any_special = false;  // an inf/NaN somewhere: the caller rescans the row
};

// Sums of one block relative to the row's running maxima, found in one pass; false when the
// block needs the two-pass path (an inf/NaN, or a logit far above the running max).
bool add_block_at_running_max(const float* ref, const float* cand, int64_t begin, int64_t end, RowPairSums* sums) {
#ifdef WIDEATTN_HAVE_AVX2_PATH
    if (!cpu_has_avx2_fma() || sums->ref.max_block < 0) return false;
    const ShiftedBlockSums block =
        block_sums_shifted_avx2(ref + begin, cand + begin, end - begin, sums->ref.max, sums->cand.max);
    if (!std::isfinite(block.sums.weighted) || block.ref_max - sums->ref.max > kMaxShiftExcess ||
        block.cand_max - sums->cand.max > kMaxShiftExcess)
        return false;
    sums->ref.add_at_current_max(block.ref_max, block.sums.ref_exp, block.sums.weighted, begin);
    sums->cand.add_at_current_max(block.cand_max, block.sums.cand_exp, 0.0, begin);
    return true;
#else
    (void)ref, (void)cand, (void)begin, (void)end, (void)sums;
    return false;
#endif
}

// The first block (and any block add_block_at_running_max declines) is scanned for its max,
// then summed relative to it; later blocks are summed relative to the running max in one pass.
RowPairSums row_pair_sums(const float* ref, const float* cand, int64_t vocab) {
    RowPairSums sums;
    for (int64_t begin = 0; begin < vocab; begin += kSumBlock) {
        const int64_t end = std::min(vocab, begin + kSumBlock);
        if (add_block_at_running_max(ref, cand, begin, end, &sums)) continue;
        const BlockMax ref_block = block_max(ref, begin, end);
        const BlockMax cand_block = block_max(cand, begin, end);
        if (ref_block.any_special || cand_block.any_special) {
            sums.any_special = true;
            return sums;
        }
        const bool need_clamp = static_cast<double>(ref_block.min) - ref_block.max < kExpFloor ||
                                static_cast<double>(cand_block.min) - cand_block.max < kExpFloor;
        const BlockSums block =
            block_sums(ref + begin, cand + begin, end - begin, ref_block.max, cand_block.max, need_clamp);
        sums.ref.add(ref_block.max, block.ref_exp, block.weighted, begin);
        sums.cand.add(cand_block.max, block.cand_exp, 0.0, begin);
    }
    return sums;
}

#ifdef WIDEATTN_HAVE_AVX2_PATH
// The conditioned form. With d = cand - ref, a row shift s and v = d - s, p = softmax(ref):
//   sum p e^v = 1 + X,  X = B + Phi,  B = sum p v,  Phi = sum p phi(v),  phi(v) = e^v - 1 - v >= 0,
//   KL = log sum p e^v - sum p v = Phi + (log1p(X) - X)  (= log1p(X) - B),
//   log sum exp(cand) = log sum exp(ref) + s + log1p(X).
// Nothing cancels catastrophically: Phi is a sum of non-negative terms and log1p(X) - X comes
// from a series for small X. A relative error eta_i in the weight exp(ref_i - shift) (S summed
// from the same values, so p stays normalised) moves KL by about 2-4 max|eta| KL (the
// first-order terms cancel), so the weights come from a polynomial good to 4e-11 without a
// table lookup (KL to ~1e-10 relative, 7e-11 seen); phi(v) is a polynomial for |v| < kSmallDiff
// whose error is 2e-12 of its cubic part only, and e^v - 1 - v from the table exp elsewhere
// (there phi >= 0.0078, so that difference loses nothing). s is the p-weighted mean of d over
// the first block; a row where that lies far from the whole row's mean gets a second, centred
// pass. Rows this form does not take (any inf/NaN, |max| >= kMaxConditionedLogit,
// v > kMaxConditionedDiff, B < kMinMeanDiff after centring) go to the exact path.
constexpr double kInvLn2 = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
// Weights are 2^t, t = ref log2(e) - M with M = ceil(max log2(e)), an integer: the fused
// multiply-add rounds t once (|t| <= 1021, so to 1e-13) and rescaling to a new max is an exact
// power of two. Needs |M| < 2^52 so that M is within 1 of max log2(e).
constexpr double kMaxConditionedLogit = 0x1p40;
// Weights below 2^kExp2Floor (exp(-707)) are clamped: they cannot change sums that are >= 1.
constexpr double kExp2Floor = -1020.0;
// Rescaling sums by 2^-2000 or less leaves zero (also keeps the exponent within int).
constexpr double kRescaleFloor = -2000.0;
// Minimax for 2^f on |f| <= 1/2, relative error 4.0e-11 (lowest degree first).
constexpr int kFastExp2Terms = 8;
constexpr double kFastExp2Poly[kFastExp2Terms] = {
    0.999999999961682,    0.6931471807284456,    0.24022651198157208,    0.055504103534532084,
    0.009618027253711369, 0.0013333922559077525, 0.0001546929113080106, 1.5201922641975562e-05};
// 2 phi(v) = v^2 + v^3 R(v), R minimax for 2 (e^v - 1 - v - v^2/2) / v^3 on |v| <= kSmallDiff,
// relative error 2.0e-12. The error of phi is then 1e-12 |v|^3 / 3 rather than a fraction of
// v^2, so a shift s off the row's mean by b (which adds ~b^2/2 to every phi) does not carry the
// polynomial's error into KL.
constexpr double kSmallDiff = 0.125;
constexpr double kSmallDiffSquared = kSmallDiff * kSmallDiff;
constexpr int kCubicTerms = 6;
constexpr double kCubicPoly[kCubicTerms] = {0.33333333333399023,   0.08333333333290623,    0.016666665909764487,
                                            0.0027777778282559915, 0.00039695458360938297, 4.960963299088777e-05};
// Largest v the form takes: p e^v stays far from overflow.
constexpr double kMaxConditionedDiff = 64.0;
// Smallest B the form takes: then 1 + X >= e^B >= 1/e (Jensen), so 1 + X = (1 + B) + Phi adds
// non-negative terms, and terms clamped at kExp2Floor stay negligible.
constexpr double kMinMeanDiff = -1.0;
// Recentre (see needs_recentring) when |B|^3 > kMaxCubedShift KL (the polynomial's error, 1e-12
// |B|^3 / 3, would pass 1e-11 KL) or B^2 > kMaxSquaredShift KL (rounding ~1e-16 B^2 would).
constexpr double kMaxCubedShift = 30.0;
constexpr double kMaxSquaredShift = 1e4;
// Up to this |X|, log1p(X) - X is summed from its series in u = X / (2 + X) (|u| <= 1/7).
constexpr double kSeriesLimit = 0.25;
constexpr int kAtanhTerms = 11;
// Movemask of four lanes that all have the sign bit set.
constexpr int kAllLanes = (1 << kLanes) - 1;

// c[0] + c[1] x, a piece of the Estrin-scheme polynomials below (shorter dependency chains than
// Horner's rule: the loop is partly latency-bound).
WIDEATTN_AVX2 WIDEATTN_ALWAYS_INLINE __m256d linear_avx2(const double* c, __m256d x) {
    return _mm256_fmadd_pd(_mm256_set1_pd(c[1]), x, _mm256_set1_pd(c[0]));
}

// 2^t for kExp2Floor <= t <= 0 to 4e-11 relative: t = n + f, |f| <= 1/2, 2^n added to the
// exponent field (n taken from the bits of t + kRoundingShift; vroundpd gives the same n off
// that dependency chain).
WIDEATTN_AVX2 WIDEATTN_ALWAYS_INLINE __m256d fast_exp2_avx2(__m256d t) {
    const __m256d shifted = _mm256_add_pd(t, _mm256_set1_pd(kRoundingShift));
    const __m256d f = _mm256_sub_pd(t, _mm256_round_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256d f2 = _mm256_mul_pd(f, f), f4 = _mm256_mul_pd(f2, f2);
    const __m256d low = _mm256_fmadd_pd(linear_avx2(kFastExp2Poly + 2, f), f2, linear_avx2(kFastExp2Poly, f));
    const __m256d high = _mm256_fmadd_pd(linear_avx2(kFastExp2Poly + 6, f), f2, linear_avx2(kFastExp2Poly + 4, f));
    const __m256d p = _mm256_fmadd_pd(high, f4, low);
    const __m256i scale = _mm256_slli_epi64(_mm256_castpd_si256(shifted), kDoubleMantissaBits);
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(p), scale));
}

// 2 phi(v) = v^2 + v^3 R(v) for |v| <= kSmallDiff, given v^2.
WIDEATTN_AVX2 WIDEATTN_ALWAYS_INLINE __m256d twice_phi_avx2(__m256d v, __m256d v2) {
    const __m256d upper = _mm256_fmadd_pd(linear_avx2(kCubicPoly + 4, v), v2, linear_avx2(kCubicPoly + 2, v));
    const __m256d cubic = _mm256_fmadd_pd(upper, v2, linear_avx2(kCubicPoly, v));
    return _mm256_fmadd_pd(_mm256_mul_pd(v2, v), cubic, v2);
}

// 2 phi(v) = 2 (e^v - 1 - v) for one double: the polynomial for small |v|, else std::expm1.
WIDEATTN_AVX2 double twice_phi_scalar(double v) {
    if (!(std::fabs(v) < kSmallDiff)) return 2.0 * (std::expm1(v) - v);
    double cubic = kCubicPoly[kCubicTerms - 1];
    for (int k = kCubicTerms - 2; k >= 0; --k) cubic = cubic * v + kCubicPoly[k];
    return v * v + v * v * v * cubic;
}

// The weight 2^(ref log2(e) - shift) of one logit (the scalar tails).
WIDEATTN_AVX2 double weight_scalar(double ref, double shift) {
    return std::exp2(std::max(std::fma(ref, kInvLn2, -shift), kExp2Floor));
}

WIDEATTN_AVX2 WIDEATTN_ALWAYS_INLINE double horizontal_sum(__m256d v) {
    alignas(32) double lanes[kLanes];
    _mm256_store_pd(lanes, v);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

struct BlockExtremes {
    float ref_max = -std::numeric_limits<float>::infinity();
    float ref_min = std::numeric_limits<float>::infinity();
    float cand_max = -std::numeric_limits<float>::infinity();
};

// Max and min of the reference block and max of the candidate block, eight wide, NaN ignored
// (the sums that follow catch it).
WIDEATTN_AVX2 BlockExtremes block_extremes_avx2(const float* ref, const float* cand, int64_t n) {
    constexpr int kWide = 8;
    __m256 ref_best = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    __m256 ref_least = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    __m256 cand_best = ref_best;
    int64_t i = 0;
    for (; i + kWide <= n; i += kWide) {
        const __m256 r = _mm256_loadu_ps(ref + i), c = _mm256_loadu_ps(cand + i);
        ref_best = _mm256_max_ps(r, ref_best);
        ref_least = _mm256_min_ps(r, ref_least);
        cand_best = _mm256_max_ps(c, cand_best);
    }
    alignas(32) float lanes[3][kWide];
    _mm256_store_ps(lanes[0], ref_best);
    _mm256_store_ps(lanes[1], ref_least);
    _mm256_store_ps(lanes[2], cand_best);
    BlockExtremes extremes;
    for (int lane = 0; lane < kWide; ++lane) {
        extremes.ref_max = std::max(extremes.ref_max, lanes[0][lane]);
        extremes.ref_min = std::min(extremes.ref_min, lanes[1][lane]);
        extremes.cand_max = std::max(extremes.cand_max, lanes[2][lane]);
    }
    for (; i < n; ++i) {
        extremes.ref_max = std::max(extremes.ref_max, ref[i]);
        extremes.ref_min = std::min(extremes.ref_min, ref[i]);
        extremes.cand_max = std::max(extremes.cand_max, cand[i]);
    }
    return extremes;
}

// The row shift s: the mean of d over the first block, weighted by 2^(ref log2(e) - shift).
WIDEATTN_AVX2 double conditioned_shift_avx2(const float* ref, const float* cand, int64_t n, double shift) {
    const __m256d shifts = _mm256_set1_pd(-shift), scale = _mm256_set1_pd(kInvLn2);
    const __m256d floor = _mm256_set1_pd(kExp2Floor);
    __m256d exp_sum = _mm256_setzero_pd(), diff_sum = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const __m256d r = _mm256_cvtps_pd(_mm_loadu_ps(ref + i));
        const __m256d c = _mm256_cvtps_pd(_mm_loadu_ps(cand + i));
        const __m256d e = fast_exp2_avx2(_mm256_max_pd(_mm256_fmadd_pd(r, scale, shifts), floor));
        exp_sum = _mm256_add_pd(exp_sum, e);
        diff_sum = _mm256_fmadd_pd(e, _mm256_sub_pd(c, r), diff_sum);
    }
    double total = horizontal_sum(exp_sum), weighted = horizontal_sum(diff_sum);
    for (; i < n; ++i) {
        const double r = ref[i], c = cand[i];
        const double e = weight_scalar(r, shift);
        total += e;
        weighted += e * (c - r);
    }
    return weighted / total;
}

struct ConditionedBlock {
    double exp_sum = 0.0;   // sum e, e = 2^(ref log2(e) - shift)
    double diff_sum = 0.0;  // sum e v
    double phi_sum = 0.0;   // sum e 2 phi(v)
    double max_diff = -std::numeric_limits<double>::infinity();  // largest v with |v| >= kSmallDiff
};

// The block after the one being summed (or that block itself, for the last), whose cache lines
// the sum loop prefetches (every step, at the same offset: cheaper than a test for each new
// line): it is then in L1 for the extremes pass, which otherwise waits on every line (measured
// 3-5 % of the row time).
struct NextBlock {
    const float* ref;
    const float* cand;
    int64_t last;  // index of its last column
};

// The conditioned sums of one block at the row's shift (its max so far, the block's included).
// Vectors with every |v| < kSmallDiff (the common case) take phi from the polynomial; the
// others blend in e^v - 1 - v per lane. An inf or NaN makes a sum non-finite (ref = -inf gives
// v = +inf, NaN propagates through v or the weight), which the caller checks. kClamp false: no
// weight is below 2^kExp2Floor.
template <bool kClamp>
WIDEATTN_AVX2 ConditionedBlock conditioned_block_avx2(const float* ref, const float* cand, int64_t n,
                                                      const NextBlock& next, double shift, double diff_shift) {
    const int64_t* table = exp2_fraction_table();
    const __m256d shifts = _mm256_set1_pd(-shift), scale = _mm256_set1_pd(kInvLn2);
    const __m256d diff_shifts = _mm256_set1_pd(diff_shift);
    const __m256d floor = _mm256_set1_pd(kExp2Floor), exp_floor = _mm256_set1_pd(kExpFloor);
    const __m256d small = _mm256_set1_pd(kSmallDiffSquared), two = _mm256_set1_pd(2.0);
    __m256d exp_sum = _mm256_setzero_pd(), diff_sum = _mm256_setzero_pd(), phi_sum = _mm256_setzero_pd();
    __m256d max_diff = _mm256_set1_pd(-std::numeric_limits<double>::infinity());
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const int64_t ahead = std::min(i, next.last);
        _mm_prefetch(reinterpret_cast<const char*>(next.ref + ahead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next.cand + ahead), _MM_HINT_T0);
        const __m256d r = _mm256_cvtps_pd(_mm_loadu_ps(ref + i)), c = _mm256_cvtps_pd(_mm_loadu_ps(cand + i));
        __m256d t = _mm256_fmadd_pd(r, scale, shifts);
        if (kClamp) t = _mm256_max_pd(t, floor);
        const __m256d e = fast_exp2_avx2(t);
        const __m256d v = _mm256_sub_pd(_mm256_sub_pd(c, r), diff_shifts);
        const __m256d v2 = _mm256_mul_pd(v, v);
        __m256d phi = twice_phi_avx2(v, v2);
        // Sign bit set where v^2 < kSmallDiff^2.
        const __m256d below = _mm256_sub_pd(v2, small);
        if (_mm256_movemask_pd(below) != kAllLanes) {
            const __m256d exp_v = exp_nonpositive_avx2(_mm256_max_pd(v, exp_floor), table);
            const __m256d exact = _mm256_mul_pd(two, _mm256_sub_pd(_mm256_sub_pd(exp_v, _mm256_set1_pd(1.0)), v));
            phi = _mm256_blendv_pd(exact, phi, below);
            max_diff = _mm256_max_pd(v, max_diff);
        }
        exp_sum = _mm256_add_pd(exp_sum, e);
        diff_sum = _mm256_fmadd_pd(e, v, diff_sum);
        phi_sum = _mm256_fmadd_pd(e, phi, phi_sum);
    }
    ConditionedBlock block;
    block.exp_sum = horizontal_sum(exp_sum);
    block.diff_sum = horizontal_sum(diff_sum);
    block.phi_sum = horizontal_sum(phi_sum);
    alignas(32) double diffs[kLanes];
    _mm256_store_pd(diffs, max_diff);
    for (int lane = 0; lane < kLanes; ++lane) block.max_diff = std::max(block.max_diff, diffs[lane]);
    for (; i < n; ++i) {
        const double r = ref[i], c = cand[i];
        const double e = weight_scalar(r, shift);
        const double v = (c - r) - diff_shift;
        block.exp_sum += e;
        block.diff_sum += e * v;
        block.phi_sum += e * twice_phi_scalar(v);
        if (!(std::fabs(v) < kSmallDiff)) block.max_diff = std::max(block.max_diff, v);
    }
    return block;
}

// log1p(x) - x without cancellation: for |x| <= kSeriesLimit, with u = x / (2 + x),
// log1p(x) = 2 atanh(u), so log1p(x) - x = -x^2 / (2 + x) + 2 (u^3/3 + u^5/5 + ...).
double log1p_minus_x(double x) {
    if (!(std::fabs(x) <= kSeriesLimit)) return std::log1p(x) - x;
    const double u = x / (2.0 + x), w = u * u;
    double series = 0.0;
    for (int k = kAtanhTerms - 1; k >= 0; --k) series = series * w + 1.0 / (2 * k + 3);
    return -x * x / (2.0 + x) + 2.0 * u * w * series;
}

// Sums of one pass over the row pair in the conditioned form.
struct ConditionedSums {
    double diff_shift = 0.0;  // s
    double shift = 0.0;       // M: weights are 2^(ref log2(e) - M)
    double exp_sum = 0.0;
    double diff_sum = 0.0;
    double phi_sum = 0.0;     // sum e 2 phi(v)
    float ref_max = 0.0f;
    float cand_max = 0.0f;
    int64_t ref_max_block = 0;  // first column of the first block holding the max
    int64_t cand_max_block = 0;

    double mean_diff() const { return diff_sum / exp_sum; }  // B
    double phi_mean() const { return 0.5 * phi_sum / exp_sum; }  // Phi
    double kl() const {
        const double x = mean_diff() + phi_mean();
        return std::fabs(x) <= kSeriesLimit ? phi_mean() + log1p_minus_x(x) : std::log1p(x) - mean_diff();
    }
};

// One pass over the row: each block's extremes first (an eight-wide pass; the block then stays
// in L1 for the sums), so its sums are taken at the row's max so far, rescaled by an exact power
// of two when a block holds a new max. choose_shift: s is the first block's weighted mean of d;
// otherwise sums->diff_shift is used. False when the row needs the exact path.
WIDEATTN_AVX2 bool conditioned_pass(const float* ref, const float* cand, int64_t vocab, bool choose_shift,
                                    ConditionedSums* sums) {
    ConditionedSums row = *sums;
    row.exp_sum = row.diff_sum = row.phi_sum = 0.0;
    for (int64_t begin = 0; begin < vocab; begin += kSumBlock) {
        const int64_t end = std::min(vocab, begin + kSumBlock);
        const BlockExtremes extremes = block_extremes_avx2(ref + begin, cand + begin, end - begin);
        if (begin == 0 || extremes.ref_max > row.ref_max) {
            if (!(std::fabs(extremes.ref_max) < kMaxConditionedLogit)) return false;
            const double new_shift = std::ceil(extremes.ref_max * kInvLn2);
            const int exponent = static_cast<int>(std::max(row.shift - new_shift, kRescaleFloor));
            row.exp_sum = std::ldexp(row.exp_sum, exponent);
            row.diff_sum = std::ldexp(row.diff_sum, exponent);
            row.phi_sum = std::ldexp(row.phi_sum, exponent);
            row.shift = new_shift;
            row.ref_max = extremes.ref_max;
            row.ref_max_block = begin;
        }
        if (begin == 0) {
            row.cand_max = extremes.cand_max;
            row.cand_max_block = 0;
            if (choose_shift) row.diff_shift = conditioned_shift_avx2(ref, cand, end, row.shift);
        } else if (extremes.cand_max > row.cand_max) {
            row.cand_max = extremes.cand_max;
            row.cand_max_block = begin;
        }
        const bool clamp = static_cast<double>(extremes.ref_min) * kInvLn2 - row.shift < kExp2Floor;
        const int64_t next_begin = end < vocab ? end : begin;
        const NextBlock next{ref + next_begin, cand + next_begin, std::min(vocab, next_begin + kSumBlock) - next_begin - 1};
        const ConditionedBlock block =
            clamp ? conditioned_block_avx2<true>(ref + begin, cand + begin, end - begin, next, row.shift, row.diff_shift)
                  : conditioned_block_avx2<false>(ref + begin, cand + begin, end - begin, next, row.shift, row.diff_shift);
        if (!std::isfinite(block.exp_sum + block.diff_sum + block.phi_sum) || block.max_diff > kMaxConditionedDiff)
            return false;
        row.exp_sum += block.exp_sum;
        row.diff_sum += block.diff_sum;
        row.phi_sum += block.phi_sum;
    }
    *sums = row;
    return true;
}

// Whether s lies so far from the row's p-weighted mean of d (B = mean - s) that KL would lose
// accuracy: the polynomial's error grows as |B|^3 and the rounding of Phi + (log1p(X) - X) as
// B^2, both against KL; or B < kMinMeanDiff. Peaked rows whose top token lies after the first
// block can be like this; a second pass with s + B centres them.
bool needs_recentring(const ConditionedSums& row) {
    const double mean_diff = row.mean_diff(), kl = std::fabs(row.kl());
    return !(mean_diff >= kMinMeanDiff) || std::fabs(mean_diff) * mean_diff * mean_diff > kMaxCubedShift * kl ||
           mean_diff * mean_diff > kMaxSquaredShift * kl;
}

// The whole row in the conditioned form; false when the row needs the exact path.
WIDEATTN_AVX2 bool conditioned_row_drift(const float* ref, const float* cand, int64_t vocab, RowPairDrift* drift) {
    ConditionedSums row;
    if (!conditioned_pass(ref, cand, vocab, true, &row)) return false;
    if (needs_recentring(row)) {
        row.diff_shift += row.mean_diff();
        if (!conditioned_pass(ref, cand, vocab, false, &row) || !(row.mean_diff() >= kMinMeanDiff)) return false;
    }
    drift->kl = row.kl();
    drift->ref_log_normalizer = row.shift * kLn2 + std::log(row.exp_sum);
    drift->cand_log_normalizer = drift->ref_log_normalizer + row.diff_shift + std::log1p(row.mean_diff() + row.phi_mean());
    drift->ref_argmax = first_index_of(ref, row.ref_max_block, vocab, row.ref_max);
    drift->cand_argmax = first_index_of(cand, row.cand_max_block, vocab, row.cand_max);
    return true;
}
#endif

}  // namespace

bool row_is_constant(const float* row, int64_t vocab) {
    if (vocab < 2) return false;
    for (int64_t i = 1; i < vocab; ++i)
        if (!(row[i] == row[0])) return false;
    return true;
}

RowPairDrift row_pair_drift(const float* ref, const float* cand, int64_t vocab) {
    RowPairDrift drift;
#ifdef WIDEATTN_HAVE_AVX2_PATH
    if (cpu_has_avx2_fma() && conditioned_row_drift(ref, cand, vocab, &drift)) return drift;
#endif
    Sums sums;
    const RowPairSums blocks = row_pair_sums(ref, cand, vocab);
    const RunningRow& ref_row = blocks.ref;
    const RunningRow& cand_row = blocks.cand;
    bool infinite = false;
    if (blocks.any_special) {
        const RowScan ref_scan = scan_row(ref, vocab);
        const RowScan cand_scan = scan_row(cand, vocab);
        drift.ref_problem = ref_scan.problem;
        drift.ref_problem_column = ref_scan.problem_column;
        drift.cand_problem = cand_scan.problem;
        drift.cand_problem_column = cand_scan.problem_column;
        if (ref_scan.problem != RowProblem::kNone || cand_scan.problem != RowProblem::kNone) return drift;
        sums = sums_with_zeros(ref, cand, vocab, ref_scan.max, cand_scan.max, &infinite);
        sums.ref_max = ref_scan.max;
        sums.cand_max = cand_scan.max;
        sums.ref_argmax = ref_scan.argmax;
        sums.cand_argmax = cand_scan.argmax;
    } else {
        sums.ref_exp = ref_row.exp_sum;
        sums.cand_exp = cand_row.exp_sum;
        sums.weighted_diff = ref_row.weighted;
        sums.ref_max = ref_row.max;
        sums.cand_max = cand_row.max;
        sums.ref_argmax = first_index_of(ref, ref_row.max_block, vocab, static_cast<float>(ref_row.max));
        sums.cand_argmax = first_index_of(cand, cand_row.max_block, vocab, static_cast<float>(cand_row.max));
    }
    const double log_ref_exp = std::log(sums.ref_exp);
    const double log_cand_exp = std::log(sums.cand_exp);
    drift.ref_log_normalizer = sums.ref_max + log_ref_exp;
    drift.cand_log_normalizer = sums.cand_max + log_cand_exp;
    drift.ref_argmax = sums.ref_argmax;
    drift.cand_argmax = sums.cand_argmax;
    // With p = exp(ref - ref_max) / S_ref: KL = sum p (log p - log q)
    //   = sum p (ref - cand) - (ref_max - cand_max) - log S_ref + log S_cand.
    drift.kl = infinite ? std::numeric_limits<double>::infinity()
                        : sums.weighted_diff / sums.ref_exp - (sums.ref_max - sums.cand_max) - log_ref_exp + log_cand_exp;
    return drift;
}

}  // namespace wideattn::accuracy
