// manifest_format.h - constants and helpers shared by the manifest writer
// (tools/manifest_gen.cpp) and reader (dispatch/manifest.cpp), so the two cannot drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wideattn {

constexpr int kManifestFormatVersion = 1;
constexpr const char* kManifestFileName = "manifest.json";

// Names used in manifest.json for wideattn_dtype values (index = enum value).
constexpr const char* kDtypeNames[] = {"bf16", "f16", "f32", "f64", "e4m3"};
constexpr int kDtypeCount = sizeof(kDtypeNames) / sizeof(kDtypeNames[0]);

inline const char* dtype_name(int dtype) {
    return dtype >= 0 && dtype < kDtypeCount ? kDtypeNames[dtype] : "unknown";
}

// Returns the wideattn_dtype value for a manifest name, or -1.
inline int dtype_from_name(const char* name) {
    for (int i = 0; i < kDtypeCount; ++i)
        if (std::strcmp(kDtypeNames[i], name) == 0) return i;
    return -1;
}

// 64-bit FNV-1a, the manifest's cubin checksum.
inline uint64_t fnv1a64(const void* data, size_t size) {
    constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
    constexpr uint64_t kPrime = 0x100000001b3ull;
    uint64_t hash = kOffsetBasis;
    const unsigned char* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * kPrime;
    return hash;
}

}  // namespace wideattn
