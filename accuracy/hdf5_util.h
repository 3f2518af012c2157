// hdf5_util.h - small helpers over the HDF5 C API shared by the logit-dump and attention-case
// files: an owning handle, silencing HDF5's own error printing, opening a file with a clear
// message for missing / non-HDF5 / truncated files, string attributes (ASCII and UTF-8, fixed
// and variable length, checked before they are read), dataset shapes, and the check of a
// dataset's declared size against the bytes it stores, and the rows it has no storage for.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "accuracy/row_ranges.h"

namespace wideattn::accuracy {

// Owns one HDF5 identifier and closes it with the function matching its kind.
class H5Handle {
public:
    H5Handle() = default;
    explicit H5Handle(hid_t id) : id_(id) {}
    H5Handle(const H5Handle&) = delete;
    H5Handle& operator=(const H5Handle&) = delete;
    H5Handle(H5Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
    H5Handle& operator=(H5Handle&& other) noexcept;
    ~H5Handle() { reset(); }

    hid_t get() const { return id_; }
    bool valid() const { return id_ >= 0; }
    void reset();

private:
    hid_t id_ = H5I_INVALID_HID;
};

// Serialises HDF5 calls made from several threads (the library may be built without its own
// thread safety). Taken by LogitDumpReader::read_rows, the only call made concurrently.
std::mutex& hdf5_call_mutex();

// Turns off HDF5's printing of its error stack (we report our own messages). Idempotent.
void silence_hdf5_errors();

// Opens `path` read-only; throws AccuracyError saying whether the file is missing, not HDF5,
// or unreadable (e.g. truncated).
H5Handle open_hdf5_for_reading(const std::string& path);

// Creates (truncates) `path`; throws AccuracyError on failure.
H5Handle create_hdf5_file(const std::string& path);

// Whether `name` is a link directly under `location`.
bool has_link(hid_t location, const std::string& name);

// Writes a scalar fixed-length string attribute on `object`.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);

// "an integer", "a float", "a string", ... for messages naming an HDF5 type class.
std::string hdf5_class_text(H5T_class_t type_class);

// A string attribute as read by read_string_attribute_checked.
struct StringAttribute {
    enum class Status { kAbsent, kValue, kUnreadable };
    Status status = Status::kAbsent;
    std::string value;    // kValue: the bytes as stored (UTF-8 or ASCII), up to the first NUL
    std::string problem;  // kUnreadable: why, e.g. "is an integer attribute, not a string"
};

// Longest fixed-length string attribute read (a longer one is reported unreadable).
inline constexpr size_t kMaxStringAttributeBytes = size_t{1} << 16;

// Reads a string attribute holding one string: ASCII or UTF-8 character set, fixed or variable
// length, scalar or a one-element array (h5py writes variable-length UTF-8 scalars). Before
// H5Aread it checks the type class, the dataspace (one element), the fixed size (at most
// kMaxStringAttributeBytes) and that the stored bytes match the declared type, so a corrupt
// attribute is reported instead of being handed to the library's conversion code (the string
// of a variable-length one lives in the global heap, which only probe_in_child protects).
StringAttribute read_string_attribute_checked(hid_t object, const std::string& name);

// The value of read_string_attribute_checked; nullopt when absent or unreadable.
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);

// Writes / reads a scalar numeric attribute (stored as float64 / int64 in the file).
void write_double_attribute(hid_t object, const std::string& name, double value);
std::optional<double> read_double_attribute(hid_t object, const std::string& name);

// Dimensions of a dataset's simple dataspace; throws AccuracyError naming `where` when the
// dataspace cannot be read or a dimension does not fit int64.
std::vector<int64_t> dataset_dims(hid_t dataset, const std::string& where = "a dataset");

// Calls `visit` with the offset of each chunk of the extent `dims` in chunks of shape `chunk`
// (both of one rank, every dimension > 0), the last dimension fastest, until it returns false.
void for_each_chunk_offset(const std::vector<int64_t>& dims, const std::vector<hsize_t>& chunk,
                           const std::function<bool(const std::vector<hsize_t>& offset)>& visit);

// A dataset may declare at most this many times the bytes it stores, plus kDeclaredSlackBytes
// (a dataset of fill values, or compressed data, stores fewer bytes than it declares; deflate
// cannot compress by more than ~1032:1).
inline constexpr int64_t kMaxDeclaredToStoredRatio = 1024;
inline constexpr int64_t kDeclaredSlackBytes = int64_t{1} << 20;

// A chunk of a dataset stored in chunks may have at most this many bytes: libhdf5 holds a whole
// chunk in memory to read any part of it, so a corrupt chunk shape in a small file made it
// allocate gigabytes. 256 MiB is 256 rows of a 262144-entry float32 vocab; the writer
// makes chunks of about 256 KiB.
inline constexpr int64_t kMaxChunkBytes = int64_t{256} << 20;

// Whether check_dataset_storage decodes a filtered dataset's chunks to check their sizes
// (check_filtered_chunk_sizes, filtered_chunks.h): always before the calling process reads the
// dataset with H5Dread; a caller that will not read its rows may skip it.
enum class FilteredChunks { kCheckSizes, kSkip };

// Checks a dataset's storage before anything is read from it, throwing AccuracyError naming
// `where`: the layout must be contiguous, chunked or compact (not virtual), with no external
// files and only filters this HDF5 library has; `declared_bytes` (the extent times the element
// size, computed by the caller with checked arithmetic) must be at most
// kMaxDeclaredToStoredRatio x the stored bytes (H5Dget_storage_size) + kDeclaredSlackBytes, so a
// 1 KiB file declaring terabytes of never-written chunks is refused; and the stored bytes must be
// what the layout implies (compact: all of them; contiguous: all or none; chunked without
// filters: the allocated chunks' count times a chunk's bytes; with filters, each chunk decodes to
// a chunk's bytes, which needs the filters to be deflate, shuffle or fletcher32), which HDF5 1.10
// does not check before reading past its buffers; a chunk must be at most kMaxChunkBytes.
void check_dataset_storage(hid_t dataset, int64_t declared_bytes, const std::string& where,
                           FilteredChunks filtered = FilteredChunks::kCheckSizes);

// The most a child process may take to open and check a file (probe_in_child), and the
// longest message it hands back.
inline constexpr int kProbeTimeoutMs = 10000;
inline constexpr size_t kMaxProbeMessageBytes = size_t{1} << 20;

// Runs `check` (opening and validating `path` through HDF5, throwing AccuracyError) in a child
// process (isolated_call.h) before the caller opens the file in this one: libhdf5 1.10 crashes,
// loops, reads freed memory or allocates gigabytes on some corrupt files (a global heap or an
// object header) in the calls an open makes. Throws AccuracyError with the child's own message
// when `check` threw, "libhdf5 crashed while reading the file's structure (signal N): the file
// is corrupt" when the child died, and a timeout message after `timeout_ms`. When the child
// succeeded, returns what `check` returned (at most kMaxProbeMessageBytes), which the caller
// uses instead of repeating the risky reads (attribute strings); nullopt when no child could be
// started (the caller then does everything here). Forks: call it with no other thread inside HDF5.
std::optional<std::string> probe_in_child(const std::string& path, const std::function<std::string()>& check,
                                          int timeout_ms = kProbeTimeoutMs);

// The rows of a chunk of a chunked 2-D dataset (0 when it is not chunked).
int64_t chunk_rows_of(hid_t dataset, const std::string& where);

// The rows (indices of the first dimension) of a dataset that have no storage in the file, in
// ascending ranges: what a writer that stopped early leaves, and what libhdf5 reads as the fill
// value without a word. They are every row of a contiguous dataset whose space was never
// allocated, and of a chunked one the rows of each chunk missing from its chunk index (a row
// counts when any chunk holding part of it is missing). Compact datasets always have storage. The
// chunks are counted once (H5Dget_num_chunks, one walk of the index); only when fewer are
// stored than the extent holds is each chunk looked up (H5Dget_chunk_storage_size, a search of
// the index; a failed lookup counts as missing), stopping once the missing ones are all found.
// Call after check_dataset_storage; throws AccuracyError naming `where` when the storage state
// or the chunk index cannot be read. Rows of allocated storage that no write reached (a chunk
// written in part, space allocated early) hold fill values that only the values show.
std::vector<RowRange> rows_without_storage(hid_t dataset, const std::string& where);

}  // namespace wideattn::accuracy
