// row_block_stream.h - streams aligned blocks of rows from several logit dumps (reference,
// candidate, baseline) as float, optionally reading ahead in a second thread so HDF5 reads
// overlap the computation. Memory: kSlots blocks of block_rows * vocab floats per dump.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "accuracy/logit_dump.h"

namespace wideattn::accuracy {

struct RowBlock {
    int64_t first_row = 0;
    int64_t rows = 0;
    std::vector<const float*> data;  // one [rows, vocab] array per dump, in constructor order
};

class RowBlockStream {
public:
    // All readers must have the same [tokens, vocab] shape (the caller checks). The readers
    // are used from the read-ahead thread while the stream lives; do not touch them meanwhile.
    RowBlockStream(const std::vector<LogitDumpReader*>& readers, int64_t block_rows, bool read_ahead);
    ~RowBlockStream();
    RowBlockStream(const RowBlockStream&) = delete;
    RowBlockStream& operator=(const RowBlockStream&) = delete;

    // Fills *block with the next block (valid until the next call); false after the last.
    // Rethrows a read error of the read-ahead thread.
    bool next(RowBlock* block);

    static constexpr int kSlots = 4;

private:
    void read_block(int slot, int64_t block_index);
    void read_ahead_loop();
    void stop();

    std::vector<LogitDumpReader*> readers_;
    int64_t tokens_;
    int64_t vocab_;
    int64_t block_rows_;
    int64_t block_count_;
    bool read_ahead_;
    std::vector<std::vector<float>> buffers_;  // [slot * readers + reader]

    std::mutex mutex_;
    std::condition_variable changed_;
    int64_t blocks_read_ = 0;      // blocks fully read (by the read-ahead thread)
    int64_t blocks_consumed_ = 0;  // blocks handed out by next()
    bool stopping_ = false;
    std::exception_ptr read_error_;
    int64_t read_error_block_ = -1;
    std::thread reader_thread_;
};

}  // namespace wideattn::accuracy
