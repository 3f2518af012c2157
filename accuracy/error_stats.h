// error_stats.h - error statistics of a kernel output against an fp64 reference:
// mean and max absolute error (with the flat index of the max), RMS error, relative L2,
// 1 - cosine similarity and the count of non-finite outputs; flat indices can be mapped to
// (token, head, dim) for attention outputs.
#pragma once

#include <cstdint>
#include <string>

namespace wideattn::accuracy {

struct ErrorStats {
    int64_t count = 0;            // elements compared
    int64_t nonfinite = 0;        // outputs that are NaN or +-inf
    double mean_abs = 0.0;        // mean |out - ref| over finite outputs
    double max_abs = 0.0;         // max |out - ref| over finite outputs
    int64_t max_abs_index = -1;   // flat index of max_abs (-1 when count == 0)
    double rms = 0.0;             // sqrt(mean (out - ref)^2)
    double rel_l2 = 0.0;          // ||out - ref|| / ||ref|| (0 when both are 0)
    double one_minus_cos = 0.0;   // 1 - <out, ref> / (||out|| ||ref||)
    double ref_rms = 0.0;         // sqrt(mean ref^2), for scale
};

enum class OutputType { kBF16, kF32, kF64 };

// Compares n outputs of the given type (bf16 as raw uint16 bits) to n fp64 reference values.
ErrorStats compute_error_stats(const double* ref, const void* out, OutputType type, int64_t n);

// Position of a flat index in a row-major [token][head][dim] array (e.g. max_abs_index of an
// attention output o[total_q][num_q_heads][head_dim]).
struct TokenHeadDim {
    int64_t token = -1;
    int64_t head = -1;
    int64_t dim = -1;
};
TokenHeadDim locate_token_head_dim(int64_t flat_index, int64_t num_heads, int64_t head_dim);

// One-line human summary, e.g. "mean_abs=1.2e-04 max_abs=3.1e-03@17 rms=... rel_l2=... ".
std::string format_error_stats(const ErrorStats& stats);

}  // namespace wideattn::accuracy
