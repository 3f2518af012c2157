// manifest.h - the bundle's manifest.json as the dispatcher sees it: one ManifestKernel per
// (kernel, arch) cubin, parsed and checked field by field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wideattn {

struct ManifestKernel {
    std::string name, symbol, kind, arch, cubin, features_csv;
    std::string split_symbol;                // the split-KV entry point ("split_kv" kernels), else empty
    int32_t split_registers = -1, split_spill_bytes = -1;  // its ptxas report, -1 unknown
    std::vector<std::string> features;
    uint64_t cubin_bytes = 0;
    std::string cubin_fnv1a64;
    int32_t arch_major = 0, arch_minor = 0;  // from "sm_XY[a]"
    bool arch_specific = false;              // "a" suffix: runs only on exactly that arch
    int32_t q_dtype = -1, kv_dtype = -1, o_dtype = -1;
    int32_t head_dim_min = 0, head_dim_max = 0, head_dim_step = 1;
    int32_t group_min = 0, group_max = 0;
    int32_t tile_tokens = 0, tile_keys = 0, heads_per_block_max = 0;
    int32_t threads = 0, dynamic_smem = 0, min_sm = 0;
    int32_t priority = 0;                    // selection order between kernels: the higher wins
    int32_t registers = -1, spill_stores = -1, spill_loads = -1, stack = -1;
    int32_t spill_bytes = -1;                // spill_stores + spill_loads, -1 when either is unknown

    bool has_feature(const std::string& feature) const;
    // CTAs a token tile of this kernel runs on along grid.x: kCtaPairSize for "cta_pair", else 1.
    int32_t ctas_per_tile() const;
};

struct Manifest {
    int format = 0;
    std::string library_version;
    std::vector<ManifestKernel> kernels;
};

// Parses "sm_90a" style names; false when malformed.
bool parse_arch(const std::string& arch, int32_t* major, int32_t* minor, bool* arch_specific);

// Parses manifest text; on failure returns false and sets *error (names the kernel/field).
bool parse_manifest(const std::string& text, Manifest* out, std::string* error);

// The largest manifest.json the reader takes.
constexpr uint64_t kMaxManifestBytes = uint64_t{256} << 20;

// Reads and parses DIR/manifest.json.
bool load_manifest(const std::string& bundle_dir, Manifest* out, std::string* error);

}  // namespace wideattn
