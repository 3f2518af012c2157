// logit_dump.h - HDF5 logit dumps (schema in docs/accuracy.md): a writer, and a streaming
// reader that reads row blocks through hyperslabs with a chunk cache sized to the chunks, so
// memory stays bounded whatever the file size.
//
// Schema: dataset `logits` [tokens, vocab], float32, float16, or bfloat16 stored as uint16
// with string attribute dtype="bfloat16" on the dataset; chunked by rows. Optional dataset
// `tokens` [tokens] int32 (the next-token ids). String attributes `model`, `variant`,
// `engine` on the root group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accuracy/hdf5_util.h"

namespace wideattn::accuracy {

inline constexpr const char* kLogitsDataset = "logits";
inline constexpr const char* kTokensDataset = "tokens";
inline constexpr const char* kDtypeAttribute = "dtype";
inline constexpr const char* kBFloat16Name = "bfloat16";

enum class LogitType { kFloat32, kFloat16, kBFloat16 };

const char* logit_type_name(LogitType type);          // "float32", "float16", "bfloat16"
bool parse_logit_type(const std::string& name, LogitType* type);
int64_t logit_type_bytes(LogitType type);

struct DumpMetadata {
    std::string model;
    std::string variant;
    std::string engine;
};

struct LogitDumpInfo {
    std::string path;
    int64_t tokens = 0;      // rows
    int64_t vocab = 0;       // columns
    LogitType type = LogitType::kFloat32;
    int64_t chunk_rows = 0;  // rows per HDF5 chunk (0 when the dataset is not chunked)
    bool has_tokens = false;
    DumpMetadata metadata;
};

class LogitDumpWriter {
public:
    // Creates `path` with an extendible `logits` dataset of `vocab` columns. chunk_rows 0
    // picks about kTargetChunkBytes per chunk (at least one row).
    LogitDumpWriter(const std::string& path, int64_t vocab, LogitType type,
                    const DumpMetadata& metadata, int64_t chunk_rows = 0);
    ~LogitDumpWriter();
    LogitDumpWriter(const LogitDumpWriter&) = delete;
    LogitDumpWriter& operator=(const LogitDumpWriter&) = delete;

    // Appends `count` rows of `vocab` floats (converted to the dump's type).
    void append_rows(const float* rows, int64_t count);
    // Writes the `tokens` dataset (call at most once).
    void write_tokens(const std::vector<int32_t>& tokens);
    // Flushes and closes; further calls are errors. Called by the destructor if needed.
    void close();

    int64_t rows_written() const { return rows_written_; }

    static constexpr int64_t kTargetChunkBytes = 256 << 10;

private:
    std::string path_;
    int64_t vocab_;
    LogitType type_;
    int64_t rows_written_ = 0;
    H5Handle file_;
    H5Handle dataset_;
    H5Handle file_type_;
    std::vector<uint16_t> converted_;
};

class LogitDumpReader {
public:
    // Opens and validates `path` (throws AccuracyError naming the file and the problem).
    explicit LogitDumpReader(const std::string& path);

    const LogitDumpInfo& info() const { return info_; }
    // The `tokens` dataset (empty when absent); validated to have `tokens` entries.
    std::vector<int32_t> read_tokens() const;
    // Reads rows [first, first + count) into out[count * vocab].
    void read_rows(int64_t first, int64_t count, float* out);
    void read_rows(int64_t first, int64_t count, double* out);

    // The chunk cache holds one chunk (default), which serves reads that split chunks. A
    // caller whose reads always cover whole chunks can turn it off: HDF5 then reads straight
    // into the caller's buffer instead of through the cache (one memory copy less).
    void set_chunk_cache(bool enabled);

    // Direct reads: when the logits are float32 in the machine's byte order, stored without
    // filters either contiguously or in chunks of whole rows (the writer's layout), every row's
    // bytes in the file are its floats in memory. The reader then finds each chunk's file
    // offset once (through HDF5) and copies rows with pread() on its own descriptor, outside
    // the lock that serialises HDF5 calls, so readers in several threads copy at the same time.
    // Checked at open against an H5Dread of the first row; any other layout, or a mismatch,
    // reads through H5Dread. On by default where possible; tests turn it off to compare.
    bool direct_reads() const { return direct_fd_ >= 0; }
    void set_direct_reads(bool enabled);

    ~LogitDumpReader();
    LogitDumpReader(const LogitDumpReader&) = delete;
    LogitDumpReader& operator=(const LogitDumpReader&) = delete;

private:
    void open_dataset(bool chunk_cache);
    // The row layout direct reads need, or false (and no descriptor) when the dataset has another.
    bool open_direct();
    void close_direct();
    void read_direct(int64_t first, int64_t count, float* out) const;

    // Throws AccuracyError unless rows [first, first + count) lie inside the dump.
    void check_row_range(int64_t first, int64_t count) const;
    // Rows [first, first + count), already range-checked, through H5Dread as memory_type.
    void read_raw(int64_t first, int64_t count, void* out, hid_t memory_type);

    LogitDumpInfo info_;
    H5Handle file_;
    H5Handle dataset_;
    H5Handle memory_type_;
    std::vector<uint16_t> raw16_;
    std::vector<float> staging_;
    int direct_fd_ = -1;
    int64_t direct_chunk_rows_ = 0;             // rows per chunk of direct_offsets_ (all rows when contiguous)
    std::vector<int64_t> direct_offsets_;       // file offset of each chunk's first row
};

}  // namespace wideattn::accuracy
