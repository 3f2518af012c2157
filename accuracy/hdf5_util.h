// hdf5_util.h - small helpers over the HDF5 C API shared by the logit-dump and attention-case
// files: an owning handle, silencing HDF5's own error printing, opening a file with a clear
// message for missing / non-HDF5 / truncated files, string attributes, dataset shapes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

// Reads a scalar string attribute (fixed- or variable-length); nullopt when absent or not a
// string.
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);

// Writes / reads a scalar numeric attribute (stored as float64 / int64 in the file).
void write_double_attribute(hid_t object, const std::string& name, double value);
std::optional<double> read_double_attribute(hid_t object, const std::string& name);

// Dimensions of a dataset's simple dataspace.
std::vector<int64_t> dataset_dims(hid_t dataset);

}  // namespace wideattn::accuracy
