// split_worker.h - runs a range of independent work items on the calling thread and one
// persistent helper thread (the machine this targets has 2 cores; the read-ahead thread of
// RowBlockStream mostly waits on the kernel's copy). Deterministic: each item is computed by
// exactly one thread and results are stored per item.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace wideattn::accuracy {

class SplitWorker {
public:
    // use_helper false: everything runs on the calling thread.
    explicit SplitWorker(bool use_helper);
    ~SplitWorker();
    SplitWorker(const SplitWorker&) = delete;
    SplitWorker& operator=(const SplitWorker&) = delete;

    // Calls work(begin, end) for [0, split) on this thread and [split, count) on the helper,
    // split = count / 2, and returns when both are done (rethrowing a helper exception).
    void run(int64_t count, const std::function<void(int64_t begin, int64_t end)>& work);

private:
    void helper_loop();

    bool use_helper_;
    std::mutex mutex_;
    std::condition_variable changed_;
    const std::function<void(int64_t, int64_t)>* work_ = nullptr;
    int64_t begin_ = 0, end_ = 0;
    uint64_t generation_ = 0;  // incremented per run
    uint64_t finished_ = 0;    // generation the helper has completed
    bool stopping_ = false;
    std::exception_ptr error_;
    std::thread helper_;
};

}  // namespace wideattn::accuracy
