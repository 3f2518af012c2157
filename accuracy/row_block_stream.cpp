// row_block_stream.cpp - see row_block_stream.h.
#include "accuracy/row_block_stream.h"

#include <algorithm>

#include "accuracy/accuracy_error.h"

namespace wideattn::accuracy {

RowBlockStream::RowBlockStream(const std::vector<LogitDumpReader*>& readers, int64_t block_rows, bool read_ahead)
    : readers_(readers), read_ahead_(read_ahead) {
    if (readers_.empty()) throw AccuracyError("RowBlockStream: no dumps to read");
    if (block_rows < 1) throw AccuracyError("RowBlockStream: block_rows must be >= 1, got " + std::to_string(block_rows));
    tokens_ = readers_[0]->info().tokens;
    vocab_ = readers_[0]->info().vocab;
    block_rows_ = std::min(block_rows, tokens_);
    block_count_ = (tokens_ + block_rows_ - 1) / block_rows_;
    // Blocks that cover whole chunks need no chunk cache (HDF5 then reads into our buffers).
    for (LogitDumpReader* reader : readers_) {
        const int64_t chunk_rows = reader->info().chunk_rows;
        if (chunk_rows > 0 && block_rows_ % chunk_rows == 0) reader->set_chunk_cache(false);
    }
    const int slots = read_ahead_ ? kSlots : 1;
    buffers_.resize(static_cast<size_t>(slots) * readers_.size());
    for (auto& buffer : buffers_) buffer.resize(static_cast<size_t>(block_rows_ * vocab_));
    if (read_ahead_) reader_thread_ = std::thread(&RowBlockStream::read_ahead_loop, this);
}

RowBlockStream::~RowBlockStream() { stop(); }

void RowBlockStream::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (reader_thread_.joinable()) reader_thread_.join();
}

void RowBlockStream::read_block(int slot, int64_t block_index) {
    const int64_t first = block_index * block_rows_;
    const int64_t rows = std::min(block_rows_, tokens_ - first);
    for (size_t r = 0; r < readers_.size(); ++r)
        readers_[r]->read_rows(first, rows, buffers_[static_cast<size_t>(slot) * readers_.size() + r].data());
}

void RowBlockStream::read_ahead_loop() {
    for (int64_t block = 0; block < block_count_; ++block) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            // Slot of `block` is free once the consumer has moved past block - kSlots + 1
            // (the block it holds is still in use until its next call).
            changed_.wait(lock, [&] { return stopping_ || block - blocks_consumed_ < kSlots - 1; });
            if (stopping_) return;
        }
        try {
            read_block(static_cast<int>(block % kSlots), block);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            read_error_ = std::current_exception();
            read_error_block_ = block;
            changed_.notify_all();
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            blocks_read_ = block + 1;
        }
        changed_.notify_all();
    }
}

bool RowBlockStream::next(RowBlock* block) {
    const int64_t index = blocks_consumed_;
    if (index >= block_count_) return false;
    int slot = 0;
    if (read_ahead_) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return blocks_read_ > index || read_error_block_ == index; });
        if (blocks_read_ <= index) std::rethrow_exception(read_error_);
        slot = static_cast<int>(index % kSlots);
    } else {
        read_block(0, index);
    }
    block->first_row = index * block_rows_;
    block->rows = std::min(block_rows_, tokens_ - block->first_row);
    block->data.resize(readers_.size());
    for (size_t r = 0; r < readers_.size(); ++r)
        block->data[r] = buffers_[static_cast<size_t>(slot) * readers_.size() + r].data();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        blocks_consumed_ = index + 1;
    }
    changed_.notify_all();
    return true;
}

}  // namespace wideattn::accuracy
