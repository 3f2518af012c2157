// bench_suite.cpp - the cases, input pools, per-case buffers and split-KV workspace `wideattn
// bench` and `wideattn tune` share (see bench_suite.h).
#include "tools/cli/bench_suite.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "accuracy/bf16.h"
#include "fp8/codec/e4m3.h"

namespace wideattn::cli {
namespace {

constexpr size_t kPoolElements = size_t{1} << 25;  // 32 Mi random bf16 values tiled into inputs
constexpr int32_t kK = 1024;                       // the "k" of the case names
constexpr int32_t kMixedChunk = 2048;              // the decode suite's mixed batch: one chunk of 2048
constexpr int32_t kMixedChunkContext = 4096;       // new tokens at context 4096 (seq_lens_k 6144)
constexpr int32_t kMixedDecodes = 63;              // and 63 single-token decodes
constexpr int32_t kMixedDecodeContext = 8192;      // at context 8192
constexpr int32_t kVerifyTokens = 5;               // speculative verification: 5 query tokens per sequence

// A decode-suite case of `count` sequences of `q_len` new tokens, each after `context` cached keys.
BenchCase uniform_batch(const char* name, int32_t count, int32_t q_len, int32_t context) {
    return {name, std::vector<int32_t>(count, q_len), std::vector<int32_t>(count, context), kGemma4QHeads,
            kGemma4KvHeads, true};
}

// Fills a device buffer with the random pool, tiled from a seed-dependent offset.
std::string fill_from_pool(DeviceBuffer& buffer, const std::vector<uint16_t>& pool, size_t offset) {
    const size_t elements = buffer.bytes() / sizeof(uint16_t);
    std::vector<uint16_t> staging(std::min(elements, pool.size()));
    for (size_t done = 0; done < elements;) {
        const size_t n = std::min(staging.size(), elements - done);
        for (size_t i = 0; i < n; ++i) staging[i] = pool[(offset + done + i) % pool.size()];
        const Driver& d = buffer.gpu()->driver();
        std::string err = buffer.gpu()->check(
            d.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(buffer.get()) + done * sizeof(uint16_t), staging.data(),
                           n * sizeof(uint16_t)),
            "cuMemcpyHtoD");
        if (!err.empty()) return err;
        done += n;
    }
    return {};
}

}  // namespace

std::vector<BenchCase> gemma4_suite() {
    return {
        {"prompt_4k", {4096}, {0}},
        {"prompt_16k", {16384}, {0}},
        {"prompt_20k", {20480}, {0}},
        {"chunk_4k_ctx_8k", {4096}, {8192}},
        {"chunk_4k_ctx_16k", {4096}, {16384}},
        {"chunk_8k_ctx_8k", {8192}, {8192}},
        {"chunk_8k_ctx_16k", {8192}, {16384}},
        {"mixed_batch_4", {3000, 1500, 700, 64}, {0, 4096, 9000, 16000}},
        {"tp4_prompt_16k", {16384}, {0}, 8, 1},
    };
}

std::vector<BenchCase> gemma4_decode_suite() {
    return {
        uniform_batch("decode_32_ctx_16k", 32, 1, 16 * kK),
        uniform_batch("decode_64_ctx_4k", 64, 1, 4 * kK),
        uniform_batch("verify4_16_ctx_8k", 16, 4, 8 * kK),
    };
}

std::vector<BenchCase> gemma4_decode_bench_suite() {
    BenchCase mixed = uniform_batch(kDecodeMixedParts.mixed, 1, kMixedChunk, kMixedChunkContext);
    mixed.q_lens.insert(mixed.q_lens.end(), kMixedDecodes, 1);
    mixed.contexts.insert(mixed.contexts.end(), kMixedDecodes, kMixedDecodeContext);
    std::vector<BenchCase> suite = {
        uniform_batch("decode_1_ctx_32k", 1, 1, 32 * kK),
        uniform_batch("decode_1_ctx_128k", 1, 1, 128 * kK),
        uniform_batch("decode_8_ctx_32k", 8, 1, 32 * kK),
        uniform_batch("decode_64_ctx_8k", 64, 1, 8 * kK),
        uniform_batch("decode_128_ctx_4k", 128, 1, 4 * kK),
        uniform_batch("verify5_1_ctx_20k", 1, kVerifyTokens, 20 * kK),
        uniform_batch("verify5_32_ctx_20k", 32, kVerifyTokens, 20 * kK),
        mixed,
        uniform_batch(kDecodeMixedParts.chunk, 1, kMixedChunk, kMixedChunkContext),
        uniform_batch(kDecodeMixedParts.decodes, kMixedDecodes, 1, kMixedDecodeContext),
    };
    for (const BenchCase& c : gemma4_decode_suite()) suite.push_back(c);
    return suite;
}

bool has_empty_name(const std::string& list) {
    return !list.empty() && (list.front() == ',' || list.back() == ',' || list.find(",,") != std::string::npos);
}

bool named_cases(const std::string& list, const char* command, const char* hint, std::vector<BenchCase>* out) {
    if (list.empty()) {
        std::fprintf(stderr, "wideattn %s: --cases needs at least one case name (see %s)\n", command, hint);
        return false;
    }
    if (has_empty_name(list)) {
        std::fprintf(stderr, "wideattn %s: --cases='%s' has an empty case name\n", command, list.c_str());
        return false;
    }
    std::vector<BenchCase> suite = gemma4_suite();
    for (const BenchCase& c : gemma4_decode_bench_suite()) suite.push_back(c);
    std::stringstream names(list);
    std::string name;
    while (std::getline(names, name, ',')) {
        const auto it = std::find_if(suite.begin(), suite.end(), [&](const BenchCase& c) { return c.name == name; });
        if (it == suite.end()) {
            std::fprintf(stderr, "wideattn %s: --cases: unknown case '%s' (see %s)\n", command, name.c_str(), hint);
            return false;
        }
        out->push_back(*it);
    }
    return true;
}

HostProblem bench_problem(const BenchCase& bc, size_t c) {
    ProblemSpec spec = problem_spec(bc.q_lens, bc.contexts, bc.hq, bc.hkv, kBenchBlockSize, kBenchSeed + c);
    spec.generate_data = false;  // inputs are tiled from the random pool on the device side
    HostProblem h;
    make_problem(spec, &h);
    return h;
}

int64_t kv_read_bytes(const HostProblem& h, bool e4m3_kv, bool k_from_v) {
    int64_t keys = 0;
    for (int32_t length : h.seq_lens_k) keys += length;
    const int64_t element_bytes = e4m3_kv ? 1 : sizeof(uint16_t);
    const int64_t tensors = k_from_v ? 1 : 2;
    return tensors * keys * h.spec.num_kv_heads * h.spec.head_dim * element_bytes;
}

int32_t max_seqlen_q(const HostProblem& h) {
    int32_t longest = 0;
    for (size_t s = 0; s + 1 < h.cu_seqlens_q.size(); ++s)
        longest = std::max(longest, h.cu_seqlens_q[s + 1] - h.cu_seqlens_q[s]);
    return longest;
}

int32_t max_seqlen_k(const HostProblem& h) {
    return h.seq_lens_k.empty() ? 0 : *std::max_element(h.seq_lens_k.begin(), h.seq_lens_k.end());
}

Timing summarize(std::vector<float> ms) {
    std::sort(ms.begin(), ms.end());
    Timing t;
    t.min_ms = ms.front();
    t.median_ms = ms[ms.size() / 2];
    t.p90_ms = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    return t;
}

InputPools make_pools(bool any_e4m3, float e4m3_scale) {
    InputPools pools;
    pools.e4m3_scale = e4m3_scale;
    pools.bf16 = random_bf16(kPoolElements, 0.21f, 2026);
    if (!any_e4m3) return pools;
    pools.e4m3.resize(pools.bf16.size());
    for (size_t i = 0; i < pools.bf16.size(); ++i) {
        bool nonfinite = false;
        const float value = bf16_to_float(pools.bf16[i]) / e4m3_scale;
        const uint8_t low = fp8::e4m3_from_float(value, &nonfinite);
        const uint8_t high = fp8::e4m3_from_float(-value, &nonfinite);
        pools.e4m3[i] = static_cast<uint16_t>(low | (high << 8));
    }
    return pools;
}

// Allocates and fills the buffers of case number `c` (Q, K and V tiled from the pools at
// case-dependent offsets, the output poisoned). Returns "" or the first error.
std::string upload_case(const GpuDevice& gpu, const HostProblem& h, size_t c, const BenchVariant& variant,
                        bool reference, const InputPools& pools, CaseBuffers* b) {
    const bool e4m3_kv = variant.e4m3_kv, e4m3_q = variant.e4m3_q;
    std::string err = b->q.allocate(gpu, h.out_elements() * (e4m3_q ? 1 : sizeof(uint16_t)));
    const size_t kv_bytes = static_cast<size_t>(h.kv_elements()) * (e4m3_kv ? 1 : sizeof(uint16_t));
    if (err.empty() && !variant.k_from_v) err = b->k.allocate(gpu, kv_bytes);
    if (err.empty()) err = b->v.allocate(gpu, kv_bytes);
    const size_t o_bytes = reference ? sizeof(double) : sizeof(uint16_t);
    const size_t lse_bytes = reference ? sizeof(double) : sizeof(float);
    if (err.empty()) err = b->o.allocate(gpu, h.out_elements() * o_bytes);
    if (err.empty()) err = b->lse.allocate(gpu, h.lse_elements() * lse_bytes);
    if (err.empty()) err = b->cu.allocate(gpu, h.cu_seqlens_q.size() * 4);
    if (err.empty()) err = b->seq_k.allocate(gpu, h.seq_lens_k.size() * 4);
    if (err.empty()) err = b->table.allocate(gpu, h.block_table.size() * 4);
    const std::vector<uint16_t>& kv_pool = e4m3_kv ? pools.e4m3 : pools.bf16;
    if (err.empty()) err = fill_from_pool(b->q, e4m3_q ? pools.e4m3 : pools.bf16, 0);
    if (err.empty() && !variant.k_from_v) err = fill_from_pool(b->k, kv_pool, 7919 * (c + 1));
    if (err.empty()) err = fill_from_pool(b->v, kv_pool, 104729 * (c + 1));
    if (err.empty() && e4m3_q) err = b->q_scale.allocate(gpu, sizeof(float));
    if (err.empty() && e4m3_q) err = b->q_scale.upload(&pools.e4m3_scale, sizeof(float));
    if (err.empty() && e4m3_kv && !variant.k_from_v) err = b->k_scale.allocate(gpu, sizeof(float));
    if (err.empty() && e4m3_kv && !variant.k_from_v) err = b->k_scale.upload(&pools.e4m3_scale, sizeof(float));
    if (err.empty() && variant.k_from_v) {
        // bf16 values, as Gemma 4's checkpoint holds them (the BF16 kernel's path for the model).
        const std::vector<float> w = random_k_norm_weights(h.spec.head_dim, kBenchSeed + c, KNormWeights::kBf16);
        err = b->k_norm.allocate(gpu, w.size() * sizeof(float));
        if (err.empty()) err = b->k_norm.upload(w.data(), w.size() * sizeof(float));
        b->k_from_v = gemma4_k_from_v(static_cast<const float*>(b->k_norm.get()));
    }
    if (err.empty() && variant.cos_sin_table) {
        std::vector<uint32_t> table;
        err = k_from_v_cos_sin_table(b->k_from_v, h.spec.head_dim, std::max(max_seqlen_k(h), 1), &table);
        if (err.empty()) err = attach_device_cos_sin(gpu, table, &b->cos_sin, &b->k_from_v);
    }
    if (err.empty() && e4m3_kv) err = b->v_scale.allocate(gpu, sizeof(float));
    if (err.empty() && e4m3_kv) err = b->v_scale.upload(&pools.e4m3_scale, sizeof(float));
    if (err.empty()) err = b->cu.upload(h.cu_seqlens_q.data(), b->cu.bytes());
    if (err.empty()) err = b->seq_k.upload(h.seq_lens_k.data(), b->seq_k.bytes());
    if (err.empty()) err = b->table.upload(h.block_table.data(), b->table.bytes());
    if (err.empty()) err = b->o.fill(kPoisonByte);
    return err;
}

wideattn_prefill_params variant_params(const HostProblem& h, const CaseAddresses& a, const BenchVariant& variant,
                                       bool reference) {
    const int32_t o_dtype = reference ? WIDEATTN_DTYPE_F64 : WIDEATTN_DTYPE_BF16;
    wideattn_prefill_params p =
        h.params(a.q, a.k, a.v, a.o, a.lse, a.cu_seqlens_q, a.seq_lens_k, a.block_table, o_dtype);
    if (variant.e4m3_kv) {
        p.kv_dtype = WIDEATTN_DTYPE_E4M3;
        p.k_scale = a.k_scale;
        p.v_scale = a.v_scale;
        if (variant.v_transposed) h.use_transposed_v(&p);  // the pool's codes serve any layout
    }
    if (variant.e4m3_q) {
        p.q_dtype = WIDEATTN_DTYPE_E4M3;
        p.q_scale = a.q_scale;
    }
    if (variant.k_from_v) {
        p.k_cache = nullptr;
        p.k_scale = nullptr;
        p.flags |= WIDEATTN_FLAG_K_FROM_V;
        p.k_from_v = a.k_from_v;
    }
    p.max_seqlen_q = max_seqlen_q(h);
    p.max_seqlen_k = max_seqlen_k(h);
    return p;
}

wideattn_prefill_params case_params(const HostProblem& h, const CaseBuffers& b, const BenchVariant& variant,
                                    bool reference) {
    CaseAddresses a;
    a.q = b.q.get();
    a.k = b.k.get();
    a.v = b.v.get();
    a.o = b.o.get();
    a.lse = b.lse.get();
    a.cu_seqlens_q = static_cast<const int32_t*>(b.cu.get());
    a.seq_lens_k = static_cast<const int32_t*>(b.seq_k.get());
    a.block_table = static_cast<const int32_t*>(b.table.get());
    a.q_scale = static_cast<const float*>(b.q_scale.get());
    a.k_scale = static_cast<const float*>(b.k_scale.get());
    a.v_scale = static_cast<const float*>(b.v_scale.get());
    a.k_from_v = &b.k_from_v;
    return variant_params(h, a, variant, reference);
}

std::string attach_workspace(const wideattn_context* ctx, const GpuDevice& gpu, wideattn_prefill_params* p,
                             CaseBuffers* b) {
    int64_t bytes = 0;
    if (wideattn_workspace_size(ctx, p, &bytes) != WIDEATTN_OK)
        return std::string("wideattn_workspace_size: ") + wideattn_last_error();
    p->workspace = nullptr;
    p->workspace_bytes = 0;
    if (bytes <= 0) return {};
    std::string err = b->workspace.allocate(gpu, static_cast<size_t>(bytes));
    if (!err.empty()) return err;
    p->workspace = b->workspace.get();
    p->workspace_bytes = bytes;
    return {};
}

}  // namespace wideattn::cli
