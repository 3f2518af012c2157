// bundle_files.h - reading a bundle's files: manifest.json and the cubins, each only when it is a
// regular file (a directory, FIFO or device in its place is a clear error, never a stream
// exception or a blocked open), and a cubin checked against the manifest's size and checksum.
// No driver: unit-testable on any machine.
#pragma once

#include <cstdint>
#include <string>

#include "dispatch/manifest.h"
#include "wideattn.h"

namespace wideattn {

// Reads the whole file at `path` into *out when it is a regular file of at most `max_bytes`
// bytes. On failure returns false, leaves *out empty once the file is known to be regular, and
// sets *error, naming the path and the reason. *size_seen
// (when not null) is the file's size once it is known to be a regular file, else kSizeUnknown.
constexpr uint64_t kSizeUnknown = UINT64_MAX;
bool read_regular_file(const std::string& path, uint64_t max_bytes, std::string* out, std::string* error,
                       uint64_t* size_seen = nullptr);

// Reads kernel k's cubin from `bundle_dir` and checks it against the manifest's cubin_bytes and
// cubin_fnv1a64. Returns WIDEATTN_OK, or WIDEATTN_ERROR_BUNDLE with *message naming the file
// ("truncated or replaced file", "corrupt file", or why it cannot be read).
wideattn_status read_verified_cubin(const std::string& bundle_dir, const ManifestKernel& k, std::string* image,
                                    std::string* message);

// The manifest's form of a checksum: 16 lowercase hex digits.
std::string checksum_text(uint64_t hash);

}  // namespace wideattn
