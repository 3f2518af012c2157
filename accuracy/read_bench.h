// read_bench.h - the KL speed bar: times streaming two logit dumps through the reader alone
// against the full KL computation on the same files (alternating, repeated: the machine may be
// shared), and reports peak RSS.
#pragma once

#include <cstdint>
#include <string>

namespace wideattn::accuracy {

struct ReadBenchResult {
    int repeats = 0;
    double read_seconds = 0.0;         // fastest read-only pass
    double read_median_seconds = 0.0;
    double kl_seconds = 0.0;           // fastest compute_drift pass
    double kl_median_seconds = 0.0;
    double ratio = 0.0;                // kl_seconds / read_seconds
    int64_t bytes_read = 0;            // logits bytes of both files, per pass
    int64_t peak_rss_kib = 0;          // getrusage(RUSAGE_SELF).ru_maxrss
    double mean_kl = 0.0;              // result of the KL pass
};

// Most rounds bench-read runs (--repeat).
inline constexpr int kMaxBenchRepeats = 1000;

// Runs `repeats` (1..kMaxBenchRepeats) rounds of: read-only pass, KL pass (rows of one value
// read there only with allow_constant_rows, DriftOptions).
ReadBenchResult run_read_bench(const std::string& reference, const std::string& candidate, int repeats,
                               bool allow_constant_rows = false);

// Seconds to read every row of both dumps through LogitDumpReader in the blocks compute_drift
// uses, without computing anything (one thread: HDF5 reads are serialised anyway).
double time_read_only(const std::string& reference, const std::string& candidate);

}  // namespace wideattn::accuracy
