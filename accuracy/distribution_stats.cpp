// distribution_stats.cpp - see distribution_stats.h.
#include "accuracy/distribution_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace wideattn::accuracy {
namespace {

// Mean and sample standard error, two-pass for accuracy.
MeanWithError mean_and_error(const std::vector<double>& values) {
    MeanWithError result;
    const size_t n = values.size();
    if (n == 0) return result;
    double sum = 0.0;
    for (double v : values) sum += v;
    result.mean = sum / static_cast<double>(n);
    if (!std::isfinite(result.mean)) {
        result.stderr_mean = std::numeric_limits<double>::quiet_NaN();
        return result;
    }
    if (n < 2) return result;
    double squares = 0.0;
    for (double v : values) squares += (v - result.mean) * (v - result.mean);
    result.stderr_mean = std::sqrt(squares / static_cast<double>(n - 1) / static_cast<double>(n));
    return result;
}

}  // namespace

double percentile_of_sorted(const std::vector<double>& sorted, double fraction) {
    const double position = fraction * static_cast<double>(sorted.size() - 1);
    const size_t lower = static_cast<size_t>(std::floor(position));
    const size_t upper = std::min(lower + 1, sorted.size() - 1);
    const double weight = position - static_cast<double>(lower);
    if (weight == 0.0 || sorted[lower] == sorted[upper]) return sorted[lower];
    return sorted[lower] + weight * (sorted[upper] - sorted[lower]);
}

DistributionSummary summarize(const std::vector<double>& values) {
    DistributionSummary s;
    s.count = static_cast<int64_t>(values.size());
    if (values.empty()) return s;
    const MeanWithError m = mean_and_error(values);
    s.mean = m.mean;
    s.stderr_mean = m.stderr_mean;
    std::vector<double> sorted(values);
    std::sort(sorted.begin(), sorted.end());
    s.min = sorted.front();
    s.max = sorted.back();
    s.p0_1 = percentile_of_sorted(sorted, 0.001);
    s.p1 = percentile_of_sorted(sorted, 0.01);
    s.p5 = percentile_of_sorted(sorted, 0.05);
    s.p10 = percentile_of_sorted(sorted, 0.10);
    s.median = percentile_of_sorted(sorted, 0.50);
    s.p90 = percentile_of_sorted(sorted, 0.90);
    s.p95 = percentile_of_sorted(sorted, 0.95);
    s.p99 = percentile_of_sorted(sorted, 0.99);
    s.p99_9 = percentile_of_sorted(sorted, 0.999);
    return s;
}

MeanWithError proportion(int64_t hits, int64_t count) {
    MeanWithError result;
    if (count <= 0) return result;
    const double p = static_cast<double>(hits) / static_cast<double>(count);
    result.mean = p;
    if (count > 1) result.stderr_mean = std::sqrt(p * (1.0 - p) / static_cast<double>(count - 1));
    return result;
}

MeanWithError root_mean_square(const std::vector<double>& values) {
    std::vector<double> squares;
    squares.reserve(values.size());
    for (double v : values) squares.push_back(v * v);
    const MeanWithError mean_square = mean_and_error(squares);
    MeanWithError result;
    result.mean = std::sqrt(mean_square.mean);
    if (result.mean > 0.0) result.stderr_mean = mean_square.stderr_mean / (2.0 * result.mean);
    return result;
}

}  // namespace wideattn::accuracy
