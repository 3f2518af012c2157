// distribution_stats.h - summary statistics of a sample (per-token KL, delta-p, ...): mean with
// its standard error and the percentiles llama.cpp's --kl-divergence prints.
#pragma once

#include <cstdint>
#include <vector>

namespace wideattn::accuracy {

struct DistributionSummary {
    int64_t count = 0;
    double mean = 0.0;
    double stderr_mean = 0.0;  // sample standard deviation / sqrt(count); 0 when count < 2
    double min = 0.0;
    double p0_1 = 0.0, p1 = 0.0, p5 = 0.0, p10 = 0.0;
    double median = 0.0;
    double p90 = 0.0, p95 = 0.0, p99 = 0.0, p99_9 = 0.0;
    double max = 0.0;
};

// Percentile of sorted values by linear interpolation between closest ranks:
// position fraction * (n - 1) (numpy's default). fraction in [0, 1]; values not empty.
double percentile_of_sorted(const std::vector<double>& sorted, double fraction);

// Summary of `values` (any order). An empty input gives a zero summary with count 0. Any
// +inf makes mean +inf and stderr NaN.
DistributionSummary summarize(const std::vector<double>& values);

struct MeanWithError {
    double mean = 0.0;
    double stderr_mean = 0.0;
};

// Mean and standard error of a proportion given in [0, 1] (e.g. top-1 agreement):
// stderr = sqrt(p (1 - p) / (n - 1)), 0 when n < 2.
MeanWithError proportion(int64_t hits, int64_t count);

// Root mean square of values and its standard error by the delta method:
// se(rms) = se(mean of x^2) / (2 rms).
MeanWithError root_mean_square(const std::vector<double>& values);

}  // namespace wideattn::accuracy
