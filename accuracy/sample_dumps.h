// sample_dumps.h - deterministic synthetic logit dumps with the statistics of a trained LM's
// output (peaked, Zipf-like rank profile, per-token confidence and noise, softcap 30): a
// reference, a baseline (reference + small perturbation), a candidate that drifts less than
// the baseline (passes the gate) and one that drifts more (fails it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accuracy/logit_dump.h"

namespace wideattn::accuracy {

enum class SampleRole { kReference, kBaseline, kCandidatePass, kCandidateFail };

const char* sample_role_name(SampleRole role);       // "reference", "baseline", "candidate_pass", "candidate_fail"
bool parse_sample_role(const std::string& name, SampleRole* role);
std::string sample_file_name(SampleRole role);       // "sample_<role>.h5"

// Standard deviation of the perturbation added to the pre-softcap logits of each role.
double sample_perturbation(SampleRole role);

// Largest samples make-sample writes: the generator holds a few doubles per vocab entry and
// 16 rows per role in memory (about 1.5 GiB at the largest vocab), and the token ids.
inline constexpr int64_t kMaxSampleTokens = int64_t{1} << 24;
inline constexpr int64_t kMaxSampleVocab = int64_t{1} << 22;

struct SampleOptions {
    int64_t tokens = 256;
    int64_t vocab = 4096;
    uint64_t seed = 1;
    LogitType type = LogitType::kFloat16;
    std::vector<SampleRole> roles = {SampleRole::kReference, SampleRole::kBaseline, SampleRole::kCandidatePass,
                                     SampleRole::kCandidateFail};
    std::function<void(int64_t rows_done, int64_t rows_total)> progress;
};

// Writes <outdir>/sample_<role>.h5 for each requested role; returns the paths written. Throws
// AccuracyError for tokens outside 1..kMaxSampleTokens or vocab outside 2..kMaxSampleVocab.
std::vector<std::string> make_sample_dumps(const std::string& outdir, const SampleOptions& options);

}  // namespace wideattn::accuracy
