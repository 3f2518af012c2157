// row_kl.h - the per-token drift kernel: KL(reference || candidate) of two logit rows computed
// from log-softmax in float64 with max subtraction. The row pair is read from memory once, in
// blocks that stay in L1: the sums exp(ref - max), exp(cand - max) and exp(ref - max) *
// (ref - cand), taken at the first block's scanned max and then at the row's running max (each
// block's max found in the same pass; a scan only where a block needs it). A logit of -inf is a
// probability of exactly zero (such rows take a scalar path); NaN and +inf are input errors.
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

}  // namespace wideattn::accuracy
