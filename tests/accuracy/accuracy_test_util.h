// accuracy_test_util.h - helpers shared by the accuracy tests: a temporary directory removed
// at scope exit, independent long-double KLs (textbook, and a centred two-pass one for tiny KL),
// and small file writers for broken inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace wideattn::accuracy::testing {

class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "wideattn-acc-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// log-sum-exp of a row in long double, the textbook way (independent of row_kl.cpp).
inline long double naive_log_sum_exp(const float* row, int64_t n) {
    long double best = -std::numeric_limits<long double>::infinity();
    for (int64_t i = 0; i < n; ++i) best = std::max<long double>(best, row[i]);
    long double total = 0.0L;
    for (int64_t i = 0; i < n; ++i) total += std::exp(static_cast<long double>(row[i]) - best);
    return best + std::log(total);
}

// KL(p || q) = sum p (log p - log q) from log-softmax, in long double.
inline long double naive_kl(const float* ref, const float* cand, int64_t n) {
    const long double ref_lse = naive_log_sum_exp(ref, n);
    const long double cand_lse = naive_log_sum_exp(cand, n);
    long double kl = 0.0L;
    for (int64_t i = 0; i < n; ++i) {
        if (std::isinf(ref[i])) continue;
        const long double log_p = ref[i] - ref_lse;
        const long double log_q = cand[i] - cand_lse;
        kl += std::exp(log_p) * (log_p - log_q);
    }
    return kl;
}

// e^w - 1 - w in long double without cancellation: its Taylor series for small |w|.
inline long double expm1_minus_identity(long double w) {
    constexpr long double kSeriesLimit = 0.125L;
    constexpr int kTerms = 30;
    if (std::fabs(w) > kSeriesLimit) return std::expm1(w) - w;
    long double term = w * w / 2, total = 0.0L;
    for (int k = 3; k <= kTerms; ++k) {
        total += term;
        term *= w / k;
    }
    return total;
}

// KL(p || q) for rows that differ little, where the textbook sum cancels (its log-normaliser
// difference alone carries ~1e-18 absolute error): two passes in long double, p = softmax(ref)
// and the p-weighted mean m of d = cand - ref first, then with w = d - m (so sum p w = 0)
// KL = log sum p e^w = log1p(sum p (e^w - 1 - w)), a sum of non-negative terms. Finite logits.
inline long double careful_kl(const float* ref, const float* cand, int64_t n) {
    long double best = -std::numeric_limits<long double>::infinity();
    for (int64_t i = 0; i < n; ++i) best = std::max<long double>(best, ref[i]);
    long double total = 0.0L, mean = 0.0L;
    for (int64_t i = 0; i < n; ++i) {
        const long double weight = std::exp(static_cast<long double>(ref[i]) - best);
        total += weight;
        mean += weight * (static_cast<long double>(cand[i]) - ref[i]);
    }
    mean /= total;
    long double phi = 0.0L;
    for (int64_t i = 0; i < n; ++i) {
        const long double weight = std::exp(static_cast<long double>(ref[i]) - best);
        phi += weight * expm1_minus_identity(static_cast<long double>(cand[i]) - ref[i] - mean);
    }
    return std::log1p(phi / total);
}

inline bool relatively_close(double got, long double want, double tolerance) {
    return std::fabs(static_cast<long double>(got) - want) <= tolerance * std::fabs(want);
}

// Float64 KL is a difference of O(1) terms, so its absolute rounding error is ~1e-16 whatever
// its size: below ~1e-6 a 1e-9 relative bound is out of reach of any float64 computation.
constexpr double kKlRelativeTolerance = 1e-9;
constexpr double kKlAbsoluteFloor = 1e-15;

inline bool kl_close(double got, long double want) {
    return std::fabs(static_cast<long double>(got) - want) <=
           kKlRelativeTolerance * std::fabs(want) + kKlAbsoluteFloor;
}

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> random_row(uint64_t seed, int64_t n, double lo, double hi) {
    std::vector<float> row(static_cast<size_t>(n));
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (auto& x : row) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(lo + (hi - lo) * (static_cast<double>(state >> 11) * 0x1.0p-53));
    }
    return row;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
}

}  // namespace wideattn::accuracy::testing
