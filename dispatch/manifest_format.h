// manifest_format.h - constants and functions shared by the manifest writer
// (tools/build/manifest_gen.cpp) and reader (dispatch/manifest.cpp), so the two cannot drift.
//
// Every kernel object of manifest.json carries "priority", an integer in 0..kManifestPriorityMax
// from the bundle's kernel table (bundle/meson.build): among kernels that fit a call, the one with
// the highest priority is chosen (a tie between two kernels goes to the smaller name), and among
// the cubins of that kernel the one built for the arch closest to the device. The order of the
// kernels in the file carries no meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wideattn.h"

namespace wideattn {

constexpr int kManifestFormatVersion = 1;
constexpr const char* kManifestFileName = "manifest.json";
constexpr int32_t kManifestPriorityMax = 1 << 20;

// Names used in manifest.json for wideattn_dtype values (index = enum value; checked below).
constexpr const char* kDtypeNames[] = {"bf16", "f16", "f32", "f64", "e4m3"};
constexpr int kDtypeCount = sizeof(kDtypeNames) / sizeof(kDtypeNames[0]);

// Compile-time string equality (for static_asserts on names).
constexpr bool same_text(const char* a, const char* b) {
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
}

static_assert(kDtypeCount == WIDEATTN_DTYPE_E4M3 + 1, "one name per wideattn_dtype value");
static_assert(same_text(kDtypeNames[WIDEATTN_DTYPE_BF16], "bf16") &&
                  same_text(kDtypeNames[WIDEATTN_DTYPE_F16], "f16") &&
                  same_text(kDtypeNames[WIDEATTN_DTYPE_F32], "f32") &&
                  same_text(kDtypeNames[WIDEATTN_DTYPE_F64], "f64") &&
                  same_text(kDtypeNames[WIDEATTN_DTYPE_E4M3], "e4m3"),
              "kDtypeNames is indexed by wideattn_dtype");

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
