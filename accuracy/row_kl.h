// row_kl.h - the per-token drift kernel: KL(reference || candidate) of two logit rows in
// float64. On x86-64 CPUs with AVX2 and FMA a row pair is first taken in a well-conditioned form
// (KL = Phi + log1p(X) - X from sums of p (e^v - 1 - v) and p v, v = cand - ref - s; one
// polynomial weight per logit pair, no cancellation, so tiny KL keeps its relative accuracy);
// rows it does not take, and every row elsewhere, go to the exact path: log-softmax with max
// subtraction, the sums exp(ref - max), exp(cand - max) and exp(ref - max) (ref - cand) at the
// first block's scanned max and then at the row's running max. Both read the row pair once, in
// blocks that stay in L1. A logit of -inf is a probability of exactly zero (such rows take a
// scalar path); NaN and +inf are input errors.
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

// Max, argmax and validity of one row of `vocab` logits (a separate pass; row_pair_drift does
// not need it).
RowScan scan_row(const float* row, int64_t vocab);

struct RowPairDrift {
    RowProblem ref_problem = RowProblem::kNone;   // when not kNone, nothing else is set
    int64_t ref_problem_column = -1;
    RowProblem cand_problem = RowProblem::kNone;
    int64_t cand_problem_column = -1;
    double kl = 0.0;                  // KL(ref || cand) in nats; +inf when cand gives 0 where ref does not
    double ref_log_normalizer = 0.0;  // log sum exp(ref)
    double cand_log_normalizer = 0.0; // log sum exp(cand)
    int64_t ref_argmax = -1;          // first column of the largest logit
    int64_t cand_argmax = -1;
};

RowPairDrift row_pair_drift(const float* ref, const float* cand, int64_t vocab);

// Whether every logit of a row of vocab >= 2 has the same value (as numbers: 0 and -0 are one
// value, NaN is none). No model gives such a row; fill values, a zeroed buffer or a failed copy
// do. Stops at the first logit that differs from the first, so a model's row costs a compare or
// two (it is called on rows already read and just summed, still in cache). A row of one logit
// is one value in every dump and is never counted.
bool row_is_constant(const float* row, int64_t vocab);

}  // namespace wideattn::accuracy
