// error_stats.cpp - see error_stats.h.
#include "accuracy/error_stats.h"

#include <cmath>
#include <cstdio>

#include "accuracy/bf16.h"

namespace wideattn::accuracy {
namespace {

double load_output(const void* out, OutputType type, int64_t i) {
    switch (type) {
        case OutputType::kBF16: return bf16_to_float(static_cast<const uint16_t*>(out)[i]);
        case OutputType::kF32: return static_cast<const float*>(out)[i];
        case OutputType::kF64: return static_cast<const double*>(out)[i];
    }
    return NAN;
}

}  // namespace

ErrorStats compute_error_stats(const double* ref, const void* out, OutputType type, int64_t n) {
    ErrorStats s;
    s.count = n;
    double sum_abs = 0.0, sum_sq = 0.0, ref_sq = 0.0, out_sq = 0.0, dot = 0.0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double r = ref[i];
        const double x = load_output(out, type, i);
        ref_sq += r * r;
        if (!std::isfinite(x)) {
            ++s.nonfinite;
            continue;
        }
        ++finite;
        const double diff = std::fabs(x - r);
        sum_abs += diff;
        sum_sq += diff * diff;
        out_sq += x * x;
        dot += x * r;
        if (diff > s.max_abs || s.max_abs_index < 0) {
            s.max_abs = diff;
            s.max_abs_index = i;
        }
    }
    if (finite > 0) {
        s.mean_abs = sum_abs / static_cast<double>(finite);
        s.rms = std::sqrt(sum_sq / static_cast<double>(finite));
    }
    if (n > 0) s.ref_rms = std::sqrt(ref_sq / static_cast<double>(n));
    if (s.nonfinite > 0) {
        s.rel_l2 = INFINITY;
        s.one_minus_cos = INFINITY;
    } else {
        s.rel_l2 = ref_sq > 0.0 ? std::sqrt(sum_sq / ref_sq) : (sum_sq > 0.0 ? INFINITY : 0.0);
        const double norms = std::sqrt(out_sq) * std::sqrt(ref_sq);
        s.one_minus_cos = norms > 0.0 ? 1.0 - dot / norms : (out_sq == ref_sq ? 0.0 : 1.0);
    }
    return s;
}

TokenHeadDim locate_token_head_dim(int64_t flat_index, int64_t num_heads, int64_t head_dim) {
    TokenHeadDim where;
    if (flat_index < 0 || num_heads < 1 || head_dim < 1) return where;
    where.dim = flat_index % head_dim;
    where.head = (flat_index / head_dim) % num_heads;
    where.token = flat_index / (head_dim * num_heads);
    return where;
}

std::string format_error_stats(const ErrorStats& s) {
    char line[320];
    std::snprintf(line, sizeof line,
                  "mean_abs=%.3e max_abs=%.3e@%lld rms=%.3e rel_l2=%.3e 1-cos=%.3e nonfinite=%lld n=%lld",
                  s.mean_abs, s.max_abs, static_cast<long long>(s.max_abs_index), s.rms, s.rel_l2,
                  s.one_minus_cos, static_cast<long long>(s.nonfinite), static_cast<long long>(s.count));
    return line;
}

}  // namespace wideattn::accuracy
