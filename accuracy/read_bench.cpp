// read_bench.cpp - see read_bench.h.
#include "accuracy/read_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "accuracy/accuracy_error.h"
#include "accuracy/kl_drift.h"
#include "accuracy/row_block_stream.h"

namespace wideattn::accuracy {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double time_read_only(const std::string& reference, const std::string& candidate) {
    const auto start = std::chrono::steady_clock::now();
    LogitDumpReader ref(reference), cand(candidate);
    if (ref.info().tokens != cand.info().tokens || ref.info().vocab != cand.info().vocab)
        throw AccuracyError("bench-read: '" + reference + "' and '" + candidate + "' have different logits shapes");
    RowBlockStream stream({&ref, &cand}, default_block_rows(ref.info().vocab, ref.info().chunk_rows), true);
    RowBlock block;
    while (stream.next(&block)) {
    }
    return seconds_since(start);
}

ReadBenchResult run_read_bench(const std::string& reference, const std::string& candidate) {
    ReadBenchResult result;
    const double first_read = time_read_only(reference, candidate);
    const auto start = std::chrono::steady_clock::now();
    const DriftReport report = compute_drift(reference, candidate, "");
    result.kl_seconds = seconds_since(start);
    const double second_read = time_read_only(reference, candidate);
    result.read_seconds = std::min(first_read, second_read);
    result.ratio = result.kl_seconds / result.read_seconds;
    result.bytes_read = report.tokens * report.vocab *
                        (logit_type_bytes(report.reference_info.type) + logit_type_bytes(report.candidate_info.type));
    result.mean_kl = report.candidate_drift.kl.mean;
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    result.peak_rss_kib = usage.ru_maxrss;
    return result;
}

}  // namespace wideattn::accuracy
