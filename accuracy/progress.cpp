// progress.cpp - see progress.h.
#include "accuracy/progress.h"

#include <cstdio>
#include <unistd.h>

namespace wideattn::accuracy {

ProgressReporter::ProgressReporter(std::string label, double quiet_seconds)
    : label_(std::move(label)),
      start_(std::chrono::steady_clock::now()),
      quiet_seconds_(quiet_seconds),
      terminal_(isatty(STDERR_FILENO) != 0) {}

void ProgressReporter::update(int64_t done, int64_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (done == last_done_) return;
    if (!terminal_ && elapsed < quiet_seconds_) return;
    if (last_print_ >= 0.0 && elapsed - last_print_ < (terminal_ ? kTerminalIntervalSeconds : kLogIntervalSeconds) && done < total) return;
    last_print_ = elapsed;
    last_done_ = done;
    printed_ = true;
    std::fprintf(stderr, "%s%s: %lld/%lld rows, %.1f s%s", terminal_ ? "\r" : "", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), elapsed, terminal_ ? "" : "\n");
    std::fflush(stderr);
}

void ProgressReporter::finish() {
    if (printed_ && terminal_) std::fputc('\n', stderr);
    printed_ = false;
}

}  // namespace wideattn::accuracy
