// read_bench.h - the KL speed bar: times streaming two logit dumps through the reader alone
// against the full KL computation on the same files, and reports peak RSS.
#pragma once

#include <cstdint>
#include <string>

namespace wideattn::accuracy {

struct ReadBenchResult {
    double read_seconds = 0.0;     // fastest of the read-only passes (one before, one after)
    double kl_seconds = 0.0;       // compute_drift on the same files
    double ratio = 0.0;            // kl_seconds / read_seconds
    int64_t bytes_read = 0;        // logits bytes of both files, per pass
    int64_t peak_rss_kib = 0;      // getrusage(RUSAGE_SELF).ru_maxrss
    double mean_kl = 0.0;          // result of the KL pass
};

ReadBenchResult run_read_bench(const std::string& reference, const std::string& candidate);

// Seconds to stream every row of both dumps through LogitDumpReader and RowBlockStream (the
// same path compute_drift uses), without computing anything.
double time_read_only(const std::string& reference, const std::string& candidate);

}  // namespace wideattn::accuracy
