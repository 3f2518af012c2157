// logit_dump.h - HDF5 logit dumps (schema in docs/accuracy.md): a writer, and a streaming
// reader that reads row blocks through hyperslabs with a chunk cache sized to the chunks, so
// memory stays bounded whatever the file size.
//
// Schema: dataset `logits` [tokens, vocab], float32, float16, or bfloat16 stored as uint16 (or
// int16, read bit for bit) with string attribute dtype="bfloat16" on the dataset; chunked by
// rows. Optional dataset `tokens` [tokens] of integers (the next-token ids). String attributes
// `model`, `variant`, `engine` on the root group (ASCII or UTF-8, fixed or variable length).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accuracy/hdf5_util.h"

namespace wideattn::accuracy {

inline constexpr const char* kLogitsDataset = "logits";
inline constexpr const char* kTokensDataset = "tokens";
inline constexpr const char* kDtypeAttribute = "dtype";
inline constexpr const char* kBFloat16Name = "bfloat16";
// Largest vocab a dump may declare: token ids are int32.
inline constexpr int64_t kMaxVocab = int64_t{1} << 31;

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
    // Problems with optional parts that did not stop the read (e.g. an unreadable metadata
    // attribute, left empty), one sentence each naming the file.
    std::vector<std::string> warnings;
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
    // Opens and validates `path` (throws AccuracyError naming the file and the problem; rows the
    // file holds no data for, rows_without_storage, are one: "rows 8..15 (8 of 16) were never
    // written", checked once per dataset here, not per read). The
    // validation, and reading the token ids, first run in a child process (probe_in_child), so a
    // corrupt file that crashes or hangs libhdf5 there is an error here. Forks: construct
    // readers while no other thread is inside HDF5 (compute_drift opens them before its workers
    // start; another_reader() does not fork).
    explicit LogitDumpReader(const std::string& path);
    // The same file opened again, for another thread: its own HDF5 handles and chunk cache,
    // sharing this reader's direct-read layout (the chunk offsets, found once per file, and the
    // descriptor: pread() needs no lock). Throws if the file no longer has this reader's shape.
    // Its info() has no metadata (model, variant, engine are not read again).
    std::unique_ptr<LogitDumpReader> another_reader() const;

    const LogitDumpInfo& info() const { return info_; }
    // The `tokens` dataset (empty when absent); validated to have `tokens` entries, all written.
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
    // offset once (through HDF5, when a read first needs it) and copies rows with pread(),
    // outside the lock that serialises HDF5 calls, so readers in several threads copy at the
    // same time.
    // Checked at open against an H5Dread of the first row; any other layout, or a mismatch,
    // reads through H5Dread. On by default where possible; tests turn it off to compare.
    // HDF5 1.10 finds a chunk's address by walking the chunk index up to it, so looking up every
    // chunk costs the square of their number: a dataset of more than kMaxDirectChunks chunks
    // reads through H5Dread. On the 2-core development VM 2048 lookups take ~45 ms and 4096 ~0.18
    // s per file, about what direct reads then save a two-file drift run (docs/accuracy.md,
    // section 7). A chunk found stored otherwise (filtered) reads through H5Dread.
    bool direct_reads() const { return direct_ != nullptr; }
    void set_direct_reads(bool enabled);
    static constexpr int64_t kMaxDirectChunks = 4096;

    ~LogitDumpReader();
    LogitDumpReader(const LogitDumpReader&) = delete;
    LogitDumpReader& operator=(const LogitDumpReader&) = delete;

private:
    // Where each row's bytes lie in the file, and a descriptor to pread() them.
    struct DirectLayout;

    // The logit type of a dataset and the memory type that reads it (16-bit data as its bits).
    struct ElementType {
        LogitType type;
        H5Handle memory_type;
    };

    // kPrimary (the public constructor): first checks the file in a child process (probe_in_child,
    // which opens it kInChild), then opens it here, taking the element type's dtype decision and
    // the metadata from the child instead of reading those attributes again; looks for the direct
    // layout. kInChild: all of it here but the decode of filtered chunks (the child reads no
    // rows). kAnother (another_reader()): no direct layout (it shares the first reader's), no
    // metadata, no decode of filtered chunks (the first reader's open did it).
    enum class OpenMode { kPrimary, kInChild, kAnother };
    // What the child found, as the child hands it back (LogitDumpInfo's type, metadata, warnings).
    struct ChildFindings;

    LogitDumpReader(const std::string& path, OpenMode mode);
    static std::optional<ChildFindings> check_in_child(const std::string& path);
    // Parts of the validation at open: the [tokens, vocab] extent; the element type (`known`: the
    // type the child decided, so the dtype attribute is not read again); the layout, filters,
    // chunk shape and declared size against the stored bytes (`filtered`: whether filtered
    // chunks are decoded to check their sizes); the root attributes.
    void read_shape(hid_t dataset);
    static ElementType element_type(hid_t dataset, const std::string& path, const LogitType* known);
    void check_storage(hid_t dataset, FilteredChunks filtered);
    void read_metadata();
    void open_dataset(bool chunk_cache);
    // The row layout direct reads need, or null when the dataset has another.
    std::shared_ptr<const DirectLayout> open_direct();
    // The file offset of `chunk` (looked up through this reader's dataset the first time any
    // reader of the layout needs it), or DirectLayout::kNotDirect.
    int64_t chunk_offset(const DirectLayout& layout, int64_t chunk);
    // Rows by pread(), those of chunks stored otherwise through H5Dread.
    void read_direct(const DirectLayout& layout, int64_t first, int64_t count, float* out);

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
    std::shared_ptr<const DirectLayout> direct_;  // null: reads through H5Dread
};

}  // namespace wideattn::accuracy
