// isolated_call.cpp - see isolated_call.h. Protocol on the pipe: one status byte (1 = value,
// 0 = nullopt), then the value's bytes; the parent reads until end of file or the deadline.
#include "accuracy/isolated_call.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

// Present only in sanitizer builds: a fuzzer registers a death callback (it saves the input
// as a crash) that a child must not run for a crash the parent reports as an error.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace wideattn::accuracy {
namespace {

constexpr char kHasValue = 1;
constexpr char kNoValue = 0;
constexpr int kChildFailedStatus = 127;
constexpr size_t kReadBufferBytes = 4096;

void write_all(int fd, const char* data, size_t size) {
    while (size > 0) {
        const ssize_t written = ::write(fd, data, size);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        data += written;
        size -= static_cast<size_t>(written);
    }
}

// Signals of a crash: the child dies of them with the default action, whatever handlers the
// program installed (a test framework's, a sanitizer's), so the parent sees the signal.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

[[noreturn]] void run_child(int fd, const std::function<std::optional<std::string>()>& work, size_t max_bytes) {
    for (int signal_number : kCrashSignals) ::signal(signal_number, SIG_DFL);
    if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(nullptr);
    std::optional<std::string> value;
    try {
        value = work();
    } catch (...) {
        ::_exit(kChildFailedStatus);
    }
    const char flag = value ? kHasValue : kNoValue;
    write_all(fd, &flag, 1);
    if (value) write_all(fd, value->data(), std::min(value->size(), max_bytes + 1));
    ::close(fd);
    ::_exit(0);
}

// Reads the child's bytes until end of file; false when the deadline passed first.
bool read_until_eof(int fd, std::chrono::steady_clock::time_point deadline, size_t max_bytes, std::string* out) {
    char buffer[kReadBufferBytes];
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd waiting{fd, POLLIN, 0};
        const int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return false;  // the deadline, or poll failed: the child is killed either way
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return true;
        if (out->size() <= max_bytes + 1) out->append(buffer, static_cast<size_t>(got));
    }
}

int wait_for(pid_t child) {
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

}  // namespace

IsolatedResult run_isolated(const std::function<std::optional<std::string>()>& work, int timeout_ms,
                            size_t max_bytes) {
    IsolatedResult result;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        result.detail = std::string("pipe: ") + std::strerror(errno);
        return result;
    }
    const pid_t child = ::fork();
    if (child < 0) {
        result.detail = std::string("fork: ") + std::strerror(errno);
        ::close(fds[0]);
        ::close(fds[1]);
        return result;
    }
    if (child == 0) {
        ::close(fds[0]);
        run_child(fds[1], work, max_bytes);
    }
    ::close(fds[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string bytes;
    const bool finished = read_until_eof(fds[0], deadline, max_bytes, &bytes);
    ::close(fds[0]);
    if (!finished) ::kill(child, SIGKILL);
    const int status = wait_for(child);
    if (!finished) {
        result.status = IsolatedResult::Status::kTimedOut;
    } else if (WIFSIGNALED(status)) {
        result.status = IsolatedResult::Status::kCrashed;
        result.detail = "signal " + std::to_string(WTERMSIG(status));
    } else if (bytes.empty() || WEXITSTATUS(status) != 0) {
        result.status = IsolatedResult::Status::kCrashed;
        result.detail = "exit status " + std::to_string(WEXITSTATUS(status));
    } else if (bytes[0] == kHasValue) {
        result.status = IsolatedResult::Status::kDone;
        result.value = bytes.substr(1, max_bytes + 1);
    } else {
        result.status = IsolatedResult::Status::kFailed;
    }
    return result;
}

}  // namespace wideattn::accuracy
