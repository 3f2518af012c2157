// split_worker.cpp - see split_worker.h.
#include "accuracy/split_worker.h"

namespace wideattn::accuracy {

SplitWorker::SplitWorker(bool use_helper) : use_helper_(use_helper) {
    if (use_helper_) helper_ = std::thread(&SplitWorker::helper_loop, this);
}

SplitWorker::~SplitWorker() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (helper_.joinable()) helper_.join();
}

void SplitWorker::helper_loop() {
    uint64_t seen = 0;
    for (;;) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        const auto* work = work_;
        const int64_t begin = begin_, end = end_;
        lock.unlock();
        std::exception_ptr error;
        try {
            if (begin < end) (*work)(begin, end);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        error_ = error;
        finished_ = seen;
        lock.unlock();
        changed_.notify_all();
    }
}

void SplitWorker::run(int64_t count, const std::function<void(int64_t, int64_t)>& work) {
    if (!use_helper_ || count < 2) {
        if (count > 0) work(0, count);
        return;
    }
    const int64_t split = count / 2;
    uint64_t generation;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        work_ = &work;
        begin_ = split;
        end_ = count;
        generation = ++generation_;
    }
    changed_.notify_all();
    std::exception_ptr own_error;
    try {
        work(0, split);
    } catch (...) {
        own_error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return finished_ == generation; });
    if (own_error) std::rethrow_exception(own_error);
    if (error_) std::rethrow_exception(error_);
}

}  // namespace wideattn::accuracy
