// isolated_call.h - runs a small piece of work in a forked child process with a time limit and
// hands its result back through a pipe, so that a crash or a hang inside a library (libhdf5
// 1.10 decoding a corrupt global heap while reading a variable-length string attribute) becomes
// a reported failure of that one call instead of killing or hanging the program.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace wideattn::accuracy {

struct IsolatedResult {
    enum class Status {
        kDone,      // the work returned a value: `value`
        kFailed,    // the work returned nullopt (an ordinary error)
        kCrashed,   // the child died (a signal) or exited without a result: `detail`
        kTimedOut,  // the child ran past the limit and was killed
        kNotRun,    // no child could be started (pipe or fork failed): `detail`
    };
    Status status = Status::kNotRun;
    std::string value;
    std::string detail;
};

// Runs `work` in a child made by fork(), waits at most `timeout_ms` for it, and returns what it
// returned (values longer than `max_bytes` are cut to `max_bytes` + 1 bytes, so the caller can
// tell). The child shares nothing back but the value; it ends with _exit (no atexit handlers,
// no buffered-output flush). Callers must keep other threads out of the libraries the work
// uses while this runs (the HDF5 calls take hdf5_call_mutex()).
IsolatedResult run_isolated(const std::function<std::optional<std::string>()>& work, int timeout_ms,
                            size_t max_bytes);

}  // namespace wideattn::accuracy
