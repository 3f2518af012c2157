// read_bench.cpp - see read_bench.h.
#include "accuracy/read_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/checked_size.h"
#include "accuracy/kl_drift.h"
#include "accuracy/logit_dump.h"

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
    const int64_t tokens = ref.info().tokens, vocab = ref.info().vocab;
    const int64_t block_rows = std::min(tokens, default_block_rows(vocab, ref.info().chunk_rows));
    for (LogitDumpReader* reader : {&ref, &cand}) {  // as compute_drift does for whole-chunk reads
        const int64_t chunk_rows = reader->info().chunk_rows;
        if (chunk_rows > 0 && block_rows % chunk_rows == 0) reader->set_chunk_cache(false);
    }
    std::vector<float> ref_rows(static_cast<size_t>(block_rows * vocab)), cand_rows(ref_rows.size());
    for (int64_t first = 0; first < tokens; first += block_rows) {
        const int64_t rows = std::min(block_rows, tokens - first);
        ref.read_rows(first, rows, ref_rows.data());
        cand.read_rows(first, rows, cand_rows.data());
    }
    return seconds_since(start);
}

ReadBenchResult run_read_bench(const std::string& reference, const std::string& candidate, int repeats,
                               bool allow_constant_rows) {
    if (repeats < 1 || repeats > kMaxBenchRepeats)
        throw AccuracyError("bench-read: --repeat must be in 1.." + std::to_string(kMaxBenchRepeats) + ", got " +
                            std::to_string(repeats));
    ReadBenchResult result;
    result.repeats = repeats;
    DriftOptions options;
    options.allow_constant_rows = allow_constant_rows;
    std::vector<double> reads, kls;
    for (int round = 0; round < repeats; ++round) {
        reads.push_back(time_read_only(reference, candidate));
        const auto start = std::chrono::steady_clock::now();
        const DriftReport report = compute_drift(reference, candidate, "", options);
        kls.push_back(seconds_since(start));
        const std::string what = "bench-read: bytes of '" + reference + "' and '" + candidate + "'";
        const int64_t elements = checked_mul(report.tokens, report.vocab, what);
        result.bytes_read = checked_add(checked_mul(elements, logit_type_bytes(report.reference_info.type), what),
                                        checked_mul(elements, logit_type_bytes(report.candidate_info.type), what), what);
        result.mean_kl = report.candidate_drift.kl.mean;
    }
    std::sort(reads.begin(), reads.end());
    std::sort(kls.begin(), kls.end());
    result.read_seconds = reads.front();
    result.kl_seconds = kls.front();
    result.read_median_seconds = reads[reads.size() / 2];
    result.kl_median_seconds = kls[kls.size() / 2];
    result.ratio = result.kl_seconds / result.read_seconds;
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    result.peak_rss_kib = usage.ru_maxrss;
    return result;
}

}  // namespace wideattn::accuracy
