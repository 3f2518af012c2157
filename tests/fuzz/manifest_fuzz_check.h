// manifest_fuzz_check.h - what must hold for every input of the JSON / manifest reader, shared
// by the libFuzzer target (fuzz_manifest.cpp, which traps on a violation) and the CPU test that
// replays the committed seed corpus (tests/test_manifest.cpp): errors are located and name the
// manifest, nothing that is not JSON is accepted, and an accepted manifest's kernels satisfy the
// checks the dispatcher relies on.
#pragma once

#include <string>

#include "dispatch/json.h"
#include "dispatch/manifest.h"

namespace wideattn::fuzz {

constexpr size_t kChecksumDigits = 16;
constexpr int32_t kMinArchNumber = 10, kMaxArchNumber = 999;

// The first invariant of an accepted kernel entry that does not hold ("" when all do).
inline std::string kernel_problem(const ManifestKernel& k) {
    if (k.name.empty() || k.symbol.empty()) return "a kernel without a name or symbol";
    if (k.name.find('\0') != std::string::npos || k.cubin.find('\0') != std::string::npos)
        return "a NUL byte in a name";
    if (k.cubin.empty() || k.cubin.find('/') != std::string::npos || k.cubin[0] == '.')
        return "a cubin path outside the bundle: " + k.cubin;
    if (k.cubin_fnv1a64.size() != kChecksumDigits) return "a checksum of the wrong length";
    if (k.head_dim_min > k.head_dim_max || k.group_min > k.group_max || k.head_dim_step < 1)
        return "an empty head_dim or group range";
    const int32_t arch = k.arch_major * 10 + k.arch_minor;
    if (arch < kMinArchNumber || arch > kMaxArchNumber) return "an arch out of range: " + k.arch;
    if (k.spill_bytes < -1 || (k.spill_bytes >= 0 && k.spill_bytes != k.spill_stores + k.spill_loads))
        return "spill_bytes inconsistent with its parts";
    if (k.cubin_bytes == 0 || k.threads < 1) return "a zero size or thread count";
    return std::string();
}

// The first invariant `text` violates ("" when none); `accepted` is whether the manifest parsed.
inline std::string manifest_input_problem(const std::string& text, bool* accepted = nullptr) {
    JsonValue value;
    std::string json_error, error;
    const bool json_ok = parse_json(text, &value, &json_error);
    if (!json_ok && json_error.rfind("offset ", 0) != 0) return "a JSON error without an offset: " + json_error;
    Manifest m;
    const bool ok = parse_manifest(text, &m, &error);
    if (accepted) *accepted = ok;
    if (!ok)
        return error.rfind("manifest.json", 0) == 0 ? std::string() : "an error not naming manifest.json: " + error;
    if (!json_ok) return "a manifest accepted that is not valid JSON";
    for (const ManifestKernel& k : m.kernels)
        if (std::string why = kernel_problem(k); !why.empty()) return k.name + ": " + why;
    return std::string();
}

}  // namespace wideattn::fuzz
