// progress.h - progress lines on stderr for long runs: "label: done/total rows, elapsed".
// Silent unless stderr is a terminal or the run has taken more than kQuietSeconds; updates
// at most every kTerminalIntervalSeconds in place on a terminal, else every kLogIntervalSeconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace wideattn::accuracy {

class ProgressReporter {
public:
    // `quiet_seconds`: how long a run whose stderr is no terminal stays silent.
    explicit ProgressReporter(std::string label, double quiet_seconds = kQuietSeconds);
    // Prints "label: done/total rows, elapsed" when due; never the same count twice in a row
    // (the last block and the end of a run both report every row).
    void update(int64_t done, int64_t total);
    // Ends the line if anything was printed.
    void finish();

    static constexpr double kQuietSeconds = 1.0;
    static constexpr double kTerminalIntervalSeconds = 0.5;
    static constexpr double kLogIntervalSeconds = 5.0;  // stderr redirected to a file

private:
    std::string label_;
    std::chrono::steady_clock::time_point start_;
    double quiet_seconds_;
    double last_print_ = -1.0;
    int64_t last_done_ = -1;
    bool terminal_;
    bool printed_ = false;
};

}  // namespace wideattn::accuracy
