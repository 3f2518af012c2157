// row_kl.h - the per-token drift kernel: KL(reference || candidate) of two logit rows computed
// from log-softmax in float64 (max subtracted before exp), fused into one scan for max/argmax
// and one pass accumulating sum exp(ref), sum exp(cand) and sum exp(ref) * (ref - cand).
// A logit of -inf is a probability of exactly zero; NaN and +inf are input errors.
#pragma once

#include <cstdint>

namespace wideattn::accuracy {

enum class RowProblem { kNone, kNaN, kPositiveInfinity, kAllNegativeInfinity };

const char* row_problem_name(RowProblem problem);

struct RowScan {
    float max = 0.0f;            // largest logit
    int64_t argmax = -1;         // first column holding it
    bool has_negative_infinity = false;
    RowProblem problem = RowProblem::kNone;
    int64_t problem_column = -1; // first column with a NaN / +inf
};

// Max, argmax and validity of one row of `vocab` logits.
RowScan scan_row(const float* row, int64_t vocab);

struct RowPairDrift {
    double kl = 0.0;                      // KL(ref || cand) in nats; +inf when cand gives 0 where ref does not
    double ref_log_normalizer = 0.0;      // log sum exp(ref)
    double cand_log_normalizer = 0.0;     // log sum exp(cand)
};

// KL of two valid rows (their scans have problem == kNone).
RowPairDrift row_pair_drift(const float* ref, const float* cand, int64_t vocab, const RowScan& ref_scan,
                            const RowScan& cand_scan);

}  // namespace wideattn::accuracy
