// gate_test_util.h - what the gate tests share: seeded normal and AR(1) series, a long-double
// batch-means computation independent of accuracy/batch_means.cpp, dumps of two-logit rows
// whose KL to a uniform reference row is log cosh of the stored logit, the CLI run with stderr
// captured, and a number looked up in a JSON report.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy/accuracy_cli.h"
#include "accuracy/logit_dump.h"

namespace wideattn::accuracy::testing {

// Standard normal deviates from a splitmix64 stream and Box-Muller (the same on every platform).
class NormalStream {
public:
    explicit NormalStream(uint64_t seed) : state_(seed) {}
    double next() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        constexpr double kTwoPi = 6.283185307179586;
        const double u1 = (static_cast<double>(bits() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
        const double u2 = static_cast<double>(bits() >> 11) * 0x1.0p-53;
        const double radius = std::sqrt(-2.0 * std::log(u1));
        spare_ = radius * std::sin(kTwoPi * u2);
        has_spare_ = true;
        return radius * std::cos(kTwoPi * u2);
    }

private:
    uint64_t bits() {
        uint64_t x = (state_ += 0x9e3779b97f4a7c15ull);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    }
    uint64_t state_;
    double spare_ = 0.0;
    bool has_spare_ = false;
};

// n values of a stationary AR(1) series with lag-1 correlation rho, mean `mean` and marginal
// standard deviation `sd`: x_t = rho x_t-1 + sqrt(1 - rho^2) e_t, x_0 ~ N(0, 1).
inline std::vector<double> ar1_series(uint64_t seed, int64_t n, double rho, double mean, double sd) {
    NormalStream normal(seed);
    std::vector<double> out(static_cast<size_t>(n));
    double x = normal.next();
    const double innovation = std::sqrt(1.0 - rho * rho);
    for (int64_t t = 0; t < n; ++t) {
        if (t > 0) x = rho * x + innovation * normal.next();
        out[static_cast<size_t>(t)] = mean + sd * x;
    }
    return out;
}

struct LongDoubleBatchMeans {
    long double mean = 0;           // of all values
    long double stderr_mean = 0;    // sqrt(b * var(block means) / n), blocks of b, floor(n / b) of them
    long double naive_stderr = 0;   // sd / sqrt(n)
    long double lag1 = 0;
};

// Textbook batch means in long double (the reference the gate's numbers are checked against).
template <typename T>
LongDoubleBatchMeans long_double_batch_means(const std::vector<T>& values, int64_t b) {
    LongDoubleBatchMeans r;
    const int64_t n = static_cast<int64_t>(values.size());
    for (T v : values) r.mean += v;
    r.mean /= n;
    long double squares = 0, cross = 0;
    for (int64_t t = 0; t < n; ++t) {
        squares += (values[t] - r.mean) * (values[t] - r.mean);
        if (t + 1 < n) cross += (values[t] - r.mean) * (values[t + 1] - r.mean);
    }
    r.naive_stderr = std::sqrt(squares / (n - 1) / n);
    r.lag1 = squares > 0 ? cross / squares : 0;
    const int64_t k = n / b;
    std::vector<long double> means(static_cast<size_t>(k), 0.0L);
    long double grand = 0;
    for (int64_t j = 0; j < k; ++j) {
        for (int64_t i = 0; i < b; ++i) means[j] += values[j * b + i];
        means[j] /= b;
        grand += means[j];
    }
    grand /= k;
    long double spread = 0;
    for (long double m : means) spread += (m - grand) * (m - grand);
    r.stderr_mean = std::sqrt(b * spread / (k - 1) / n);
    return r;
}

// Rows (g, -g): against the reference row (0, 0) the KL is log cosh(g).
inline void write_two_logit_dump(const std::string& path, const std::vector<float>& g) {
    LogitDumpWriter writer(path, 2, LogitType::kFloat32, {"two-logit", "test", "gate_test_util"});
    std::vector<float> rows;
    for (float x : g) {
        rows.push_back(x);
        rows.push_back(-x);
    }
    writer.append_rows(rows.data(), static_cast<int64_t>(g.size()));
    writer.close();
}

// The logits g_t with log cosh(g_t) = log cosh(base) + d_t (d_t > -log cosh(base)).
inline std::vector<float> logits_for_differences(double base, const std::vector<double>& d) {
    std::vector<float> g;
    for (double x : d) g.push_back(static_cast<float>(std::acosh(std::cosh(base) * std::exp(x))));
    return g;
}

// KL((1/2, 1/2) || softmax(g, -g)) in long double, independent of the gate's KL code.
inline long double two_logit_kl(float g) { return std::log(std::cosh(static_cast<long double>(g))); }

struct CliRun {
    int status = -1;
    std::string err;  // what the run wrote to stderr
};

// accuracy_main on `args` (after "accuracy"), stderr captured through a temporary file.
inline CliRun run_accuracy_cli(const std::vector<std::string>& args) {
    std::vector<std::string> storage = {"accuracy"};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    FILE* capture = std::tmpfile();
    const int saved = dup(STDERR_FILENO);
    dup2(fileno(capture), STDERR_FILENO);
    CliRun run;
    run.status = accuracy_main(static_cast<int>(storage.size()), argv.data());
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::rewind(capture);
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, capture)) > 0) run.err.append(buffer, got);
    std::fclose(capture);
    return run;
}

inline std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The number after "key": in a JSON text (the first occurrence); NaN when absent.
inline double json_number(const std::string& json, const std::string& key) {
    const std::string quoted = "\"" + key + "\":";
    const size_t at = json.find(quoted);
    if (at == std::string::npos) return std::nan("");
    return std::strtod(json.c_str() + at + quoted.size(), nullptr);
}

}  // namespace wideattn::accuracy::testing
