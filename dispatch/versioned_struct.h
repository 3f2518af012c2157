// versioned_struct.h - reading the C API's versioned structs (include/wideattn.h, "Versioned
// structs": the first field is uint32_t struct_size) for the plan API and K from V.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace wideattn {

// Reads a caller's versioned struct into *out: any size from the struct's first version
// (`first_size`, of C API `first_version`) up to this library's, fields past the caller's size
// left at 0, or a larger one whose bytes past this library's size are all zero.
template <typename T>
bool read_versioned(const void* in, size_t first_size, const char* first_version, const char* name, T* out,
                    std::string* message) {
    uint32_t size = 0;
    std::memcpy(&size, in, sizeof size);
    if (size < first_size) {
        *message = std::string(name) + ".struct_size=" + std::to_string(size) + " is below " +
                   std::to_string(first_size) + ", the size of its first version (C API " + first_version +
                   "): set it to sizeof(" + name + ")";
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

}  // namespace wideattn
