// test_helpers.h - shared fixtures for the CPU tests: a temporary directory, an environment
// variable set for one scope, file writing, a synthetic manifest, and well-formed prefill params
// with fake (never dereferenced) device pointers.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "wideattn.h"

namespace wideattn::test {

class TempDir {
public:
    TempDir() {
        char pattern[] = "/tmp/wideattn-test-XXXXXX";
        path_ = mkdtemp(pattern);
    }
    ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Sets (or with NULL unsets) an environment variable for one scope, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) had_ = true, old_ = old;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_) setenv(name_, old_.c_str(), 1);
        else unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    bool had_ = false;
    std::string old_;
};

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The bundle built by this build tree (tests/meson.build sets WIDEATTN_BUNDLE).
inline std::string built_bundle() {
    const char* dir = std::getenv("WIDEATTN_BUNDLE");
    return dir ? dir : "build/bundle";
}

// One manifest kernel entry as JSON (fields as manifest_gen writes them).
inline std::string kernel_json(const std::string& name, const std::string& arch, const std::string& o_dtype,
                               int head_min, int head_max, int head_step, int group_min, int group_max,
                               const std::string& features = "\"varlen\", \"paged\", \"lse\"", int cubin_bytes = 4,
                               const std::string& hash = "0000000000000000", const std::string& kind = "prefill",
                               int priority = 0) {
    return "{\"name\": \"" + name + "\", \"symbol\": \"wideattn_" + name + "\", \"kind\": \"" + kind +
           "\", \"priority\": " + std::to_string(priority) + ", \"arch\": \"" + arch +
           "\", \"cubin\": \"" + name + "." + arch + ".cubin\", \"cubin_bytes\": " + std::to_string(cubin_bytes) +
           ", \"cubin_fnv1a64\": \"" + hash + "\", \"q_dtype\": \"bf16\", \"kv_dtype\": \"bf16\", \"o_dtype\": \"" +
           o_dtype + "\", \"head_dim\": {\"min\": " + std::to_string(head_min) + ", \"max\": " +
           std::to_string(head_max) + ", \"step\": " + std::to_string(head_step) + "}, \"group\": {\"min\": " +
           std::to_string(group_min) + ", \"max\": " + std::to_string(group_max) +
           "}, \"tile\": {\"tokens\": 8, \"keys\": 32, \"heads\": 8}, \"threads\": 256, \"dynamic_smem\": 98304, "
           "\"min_sm\": 80, \"features\": [" + features +
           "], \"ptxas\": {\"registers\": 128, \"spill_stores\": 0, \"spill_loads\": 0, \"stack\": 0}}";
}

// kernel_json of a "split_kv" kernel: the features plus the split entry manifest_gen writes.
inline std::string split_kernel_json(const std::string& name, const std::string& arch) {
    std::string entry = kernel_json(name, arch, "bf16", 512, 512, 512, 8, 8,
                                    "\"varlen\", \"paged\", \"lse\", \"split_kv\"");
    entry.pop_back();  // the closing brace
    return entry + ", \"split_symbol\": \"wideattn_" + name +
           "_split\", \"split_ptxas\": {\"registers\": 128, \"spill_stores\": 0, \"spill_loads\": 0, \"stack\": 0}}";
}

inline std::string manifest_json(const std::vector<std::string>& kernels) {
    std::string text = "{\"format\": 1, \"library_version\": \"0.2.0\", \"kernels\": [";
    for (size_t i = 0; i < kernels.size(); ++i) text += (i ? ", " : "") + kernels[i];
    return text + "]}";
}

// A valid bf16 prefill problem description (Gemma 4 global layer at TP=1, page 16) with
// fake, 256-byte aligned device addresses. Nothing here is ever dereferenced on the host.
inline wideattn_prefill_params valid_params() {
    wideattn_prefill_params p{};
    const int64_t hq = 32, hkv = 4, d = 512, block = 16;
    auto fake = [](uintptr_t address) { return reinterpret_cast<void*>(address); };
    p.q = fake(0x10000000);
    p.q_token_stride = hq * d;
    p.q_head_stride = d;
    p.k_cache = fake(0x20000000);
    p.v_cache = fake(0x30000000);
    p.k_slot_stride = p.v_slot_stride = hkv * d;
    p.k_head_stride = p.v_head_stride = d;
    p.k_block_stride = p.v_block_stride = block * hkv * d;
    p.o = fake(0x40000000);
    p.o_token_stride = hq * d;
    p.o_head_stride = d;
    p.cu_seqlens_q = static_cast<const int32_t*>(fake(0x50000000));
    p.seq_lens_k = static_cast<const int32_t*>(fake(0x50001000));
    p.block_table = static_cast<const int32_t*>(fake(0x50002000));
    p.block_table_stride = 1024;
    p.num_seqs = 2;
    p.total_q = 100;
    p.num_q_heads = static_cast<int32_t>(hq);
    p.num_kv_heads = static_cast<int32_t>(hkv);
    p.head_dim = static_cast<int32_t>(d);
    p.block_size = static_cast<int32_t>(block);
    p.num_blocks = 2048;
    p.q_dtype = p.kv_dtype = p.o_dtype = WIDEATTN_DTYPE_BF16;
    p.softmax_scale = 1.0f;
    return p;
}

// Fake address `index` x 2^40: windows far past the valid_* params' tensors (below 2^32), each
// large enough for any tensor of a test.
constexpr int kFarWindowBits = 40;
inline void* far_window(uintptr_t index) { return reinterpret_cast<void*>(index << kFarWindowBits); }

// The K-from-V description of k_from_v_params (one per thread, reset by each call), its k_norm_scale
// a fake device address apart from valid_params' tensors.
constexpr uintptr_t kFakeKNormScale = 0x70000000;
constexpr float kTestRopeTheta = 1.0e6f;
constexpr int32_t kTestRotaryDims = 128;
inline wideattn_k_from_v& k_from_v_desc() {
    static thread_local wideattn_k_from_v desc{};
    return desc;
}

// valid_params in K-from-V mode: k_cache NULL, WIDEATTN_FLAG_K_FROM_V, k_from_v_desc() (Gemma 4's
// global layers) reset to valid values.
inline wideattn_prefill_params k_from_v_params() {
    wideattn_prefill_params p = valid_params();
    p.k_cache = nullptr;
    p.flags = WIDEATTN_FLAG_K_FROM_V;
    k_from_v_desc() = wideattn_k_from_v{sizeof(wideattn_k_from_v), WIDEATTN_ROPE_PROPORTIONAL,
                                        reinterpret_cast<const float*>(kFakeKNormScale), kTestRopeTheta,
                                        kTestRotaryDims, WIDEATTN_ROPE_ROTATE_HALF, 0, nullptr, nullptr, 0, 0};
    p.k_from_v = &k_from_v_desc();
    return p;
}

// Moves every tensor of `p` into its own far_window, so calls with more rows than valid_params'
// 256 MiB windows hold (total_q above 8192) keep their tensors apart.
inline wideattn_prefill_params tensors_apart(wideattn_prefill_params p) {
    const auto window = far_window;
    p.q = window(1);
    p.k_cache = window(2);
    p.v_cache = window(3);
    p.o = window(4);
    if (p.lse) p.lse = window(5);
    if (p.workspace) p.workspace = window(6);
    p.cu_seqlens_q = static_cast<const int32_t*>(window(7));
    p.seq_lens_k = static_cast<const int32_t*>(window(8));
    p.block_table = static_cast<const int32_t*>(window(9));
    return p;
}

// A valid quantise-into-cache description (4 KV heads of 512 dims, page 16) with fake,
// aligned device addresses.
inline wideattn_quantize_params valid_quantize_params() {
    wideattn_quantize_params p{};
    const int64_t heads = 4, d = 512, block = 16;
    p.src = reinterpret_cast<const void*>(uintptr_t{0x10000000});
    p.src_token_stride = heads * d;
    p.src_head_stride = d;
    p.cache = reinterpret_cast<void*>(uintptr_t{0x20000000});
    p.cache_head_stride = d;
    p.cache_slot_stride = heads * d;
    p.cache_block_stride = block * heads * d;
    p.slot_mapping = reinterpret_cast<const int64_t*>(uintptr_t{0x30000000});
    p.scale = reinterpret_cast<const float*>(uintptr_t{0x30001000});
    p.tokens = 10;
    p.heads = static_cast<int32_t>(heads);
    p.head_dim = static_cast<int32_t>(d);
    p.block_size = static_cast<int32_t>(block);
    p.num_blocks = 8;
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    return p;
}

// A valid per-tensor scale description of the same tensor, with fake, aligned device addresses.
inline wideattn_scale_params valid_scale_params() {
    const wideattn_quantize_params q = valid_quantize_params();
    wideattn_scale_params p{};
    p.src = q.src;
    p.src_token_stride = q.src_token_stride;
    p.src_head_stride = q.src_head_stride;
    p.slot_mapping = q.slot_mapping;
    p.scale = reinterpret_cast<float*>(uintptr_t{0x30001000});
    p.nonfinite_count = reinterpret_cast<int32_t*>(uintptr_t{0x30002000});
    p.tokens = q.tokens;
    p.heads = q.heads;
    p.head_dim = q.head_dim;
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    return p;
}

}  // namespace wideattn::test
