// versioned_struct.h - reading the C API's versioned structs (include/wideattn.h, "Versioned
// structs": the first field is uint32_t struct_size) for the plan API and K from V.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace wideattn {

// One version of a versioned struct: its size and the C API version that introduced it.
struct StructVersion {
    size_t size;
    const char* api;
};

// "32 (C API 0.5.0) or 40 (C API 0.6.0)": the sizes of a struct's versions, oldest first.
template <size_t N>
std::string version_sizes_text(const StructVersion (&versions)[N]) {
    std::string text;
    for (size_t i = 0; i < N; ++i) {
        if (i > 0) text += (i + 1 == N) ? " or " : ", ";
        text += std::to_string(versions[i].size) + " (C API " + versions[i].api + ")";
    }
    return text;
}

// Reads a caller's versioned struct into *out: the size of one of its `versions` (oldest first,
// the last one this library's sizeof(T)), fields past the caller's size left at 0, or a larger one
// whose bytes past this library's size are all zero. Reads no byte past the caller's size.
template <typename T, size_t N>
bool read_versioned(const void* in, const StructVersion (&versions)[N], const char* name, T* out,
                    std::string* message) {
    static_assert(N >= 1, "a versioned struct has a first version");
    uint32_t size = 0;
    std::memcpy(&size, in, sizeof size);
    const std::string accepted = N > 1 ? " (accepted: " + version_sizes_text(versions) + ", or larger with zero bytes past " +
                                             std::to_string(sizeof(T)) + ")"
                                       : "";
    if (size < versions[0].size) {
        *message = std::string(name) + ".struct_size=" + std::to_string(size) + " is below " +
                   std::to_string(versions[0].size) + ", the size of its first version (C API " + versions[0].api +
                   "): set it to sizeof(" + name + ")" + accepted;
        return false;
    }
    if (size < sizeof(T) && std::none_of(versions, versions + N, [size](const StructVersion& v) { return v.size == size; })) {
        *message = std::string(name) + ".struct_size=" + std::to_string(size) + " is not the size of a version (" +
                   version_sizes_text(versions) + "): it ends inside a field; set it to sizeof(" + name + ")";
        return false;
    }
    const unsigned char* bytes = static_cast<const unsigned char*>(in);
    for (size_t i = sizeof(T); i < size; ++i)
        if (bytes[i] != 0) {
            *message = std::string(name) + ".struct_size=" + std::to_string(size) + " is larger than this library's " +
                       std::to_string(sizeof(T)) + " and byte " + std::to_string(i) +
                       " is not zero: it sets a field this library does not know (a newer header; use its library)";
            return false;
        }
    *out = T{};
    std::memcpy(static_cast<void*>(out), in, std::min<size_t>(size, sizeof(T)));
    return true;
}

// A struct with one version so far (of `first_size` bytes, C API `first_version`).
template <typename T>
bool read_versioned(const void* in, size_t first_size, const char* first_version, const char* name, T* out,
                    std::string* message) {
    const StructVersion versions[] = {{first_size, first_version}};
    return read_versioned(in, versions, name, out, message);
}

}  // namespace wideattn
