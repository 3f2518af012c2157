// bench_suite.h - what `wideattn bench` and `wideattn tune` share: the Gemma 4 31B global-layer
// cases (the prefill suite, docs/design.md section 7, and the decode suite), the random input
// pools, the device buffers and params of one case (split-KV workspace included), K/V byte
// counting and CUDA-event timing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"
#include "wideattn.h"

namespace wideattn::cli {

constexpr int32_t kBenchBlockSize = 16;  // page size of the Gemma 4 suite (docs/design.md section 7)
constexpr uint64_t kBenchSeed = 100;
constexpr long long kMaxReps = 1000000;  // --reps and --warmup of bench and tune: launches per case

constexpr int32_t kGemma4QHeads = 32;   // TP = 1 global layer of Gemma 4 31B
constexpr int32_t kGemma4KvHeads = 4;

struct BenchCase {
    std::string name;
    std::vector<int32_t> q_lens, contexts;
    int32_t hq = kGemma4QHeads, hkv = kGemma4KvHeads;
    bool decode = false;  // a case of the decode suite: also reported as K/V GB/s and % of copy bandwidth
};

// The prefill suite (what `wideattn bench` runs by default).
std::vector<BenchCase> gemma4_suite();

// The three earlier decode cases (the last three of the decode suite): many sequences of 1 or 4
// new tokens after long contexts (the decode_single and decode classes of docs/design.md).
std::vector<BenchCase> gemma4_decode_suite();

// The decode suite (`wideattn bench --suite decode`, docs/design.md section 7): single tokens and
// 5-token verifications after long contexts, the mixed batch of one 2048-token chunk and 63
// decodes with its two parts alone, then the cases of gemma4_decode_suite. Every case is decode.
std::vector<BenchCase> gemma4_decode_bench_suite();

// The mixed batch of the decode suite and the two cases that are its parts alone: bench reports
// mixed ms / (chunk ms + decodes ms) when all three ran.
struct MixedBatchParts {
    const char* mixed;
    const char* chunk;
    const char* decodes;
};
constexpr MixedBatchParts kDecodeMixedParts = {"mixed_chunk_2k_decode_63", "chunk_2k_ctx_4k", "decode_63_ctx_8k"};

// Whether the comma-separated `list` has an empty name: a leading or trailing comma, or two in a
// row (--cases, --kernels).
bool has_empty_name(const std::string& list);

// The cases a comma-separated `list` names, looked up in the prefill and decode suites, in list
// order; false after printing "wideattn COMMAND: --cases: unknown case 'NAME' (see HINT)", or that
// the list is empty or has an empty name (a given --cases never means the whole suite).
bool named_cases(const std::string& list, const char* command, const char* hint, std::vector<BenchCase>* out);

// The host-side problem of case number `c` (shapes, index arrays and a shuffled block table; no data:
// the inputs are tiled from the random pool on the device).
HostProblem bench_problem(const BenchCase& bc, size_t c);

// Bytes of K and V a decode call must read: every visible key of every sequence (seq_lens_k of
// them), once per KV head, K and V (V only for a K-from-V call), 1 byte per element for e4m3 K/V
// and 2 for bf16.
int64_t kv_read_bytes(const HostProblem& h, bool e4m3_kv, bool k_from_v = false);

// The split-KV hints of a problem: its largest q_len and its largest seq_lens_k.
int32_t max_seqlen_q(const HostProblem& h);
int32_t max_seqlen_k(const HostProblem& h);

struct Timing {
    double median_ms = 0, min_ms = 0, p90_ms = 0;
};

Timing summarize(std::vector<float> ms);

// Nothing queued ahead of a timed run (time_launches' default `ahead`).
inline std::string nothing_ahead() { return {}; }

// Times `launch` with CUDA events: warm-up, then `reps` individually timed runs, each after
// `ahead` (queued on the stream before the start event: nothing, or bench --timing queued's wait).
template <typename Launch, typename Ahead = std::string (*)()>
std::string time_launches(const GpuDevice& gpu, int warmup, int reps, Launch launch, Timing* out,
                          Ahead ahead = nothing_ahead) {
    const Driver& d = gpu.driver();
    CUevent start = nullptr, stop = nullptr;
    std::string err = gpu.check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    if (err.empty()) err = gpu.check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<float> ms;
    for (int i = 0; err.empty() && i < warmup + reps; ++i) {
        err = ahead();
        if (err.empty()) err = gpu.check(d.cuEventRecord(start, nullptr), "cuEventRecord");
        if (err.empty()) err = launch();
        if (err.empty()) err = gpu.check(d.cuEventRecord(stop, nullptr), "cuEventRecord");
        if (err.empty()) err = gpu.check(d.cuEventSynchronize(stop), "kernel execution");
        float elapsed = 0;
        if (err.empty()) err = gpu.check(d.cuEventElapsedTime(&elapsed, start, stop), "cuEventElapsedTime");
        if (err.empty() && i >= warmup) ms.push_back(elapsed);
    }
    if (start) d.cuEventDestroy(start);
    if (stop) d.cuEventDestroy(stop);
    if (err.empty()) *out = summarize(ms);
    return err;
}

// One kernel configuration timed on every case: a kernel name ("" = the dispatcher's choice)
// and the input dtypes it takes.
struct BenchVariant {
    std::string kernel;
    bool e4m3_kv = false;
    bool e4m3_q = false;
    bool v_transposed = false;  // V in the transposed layout (a kernel with the "v_transposed" feature)
    // K-from-V calls (a kernel with the "k_from_v_only" feature): WIDEATTN_FLAG_K_FROM_V, k_cache
    // and k_scale NULL, Gemma 4's description (gemma4_k_from_v) with random k_norm weights that are
    // bf16 values (KNormWeights::kBf16, as Gemma 4's checkpoint holds them).
    bool k_from_v = false;
    // `wideattn bench --kfv-cos-sin table` (K-from-V variants only): the description's cos_sin is a
    // table of every position up to the case's longest sequence, filled by wideattn_k_from_v_cos_sin.
    bool cos_sin_table = false;
    // `wideattn bench --pdl`: "on" or "off", the WIDEATTN_PDL of the context the variant runs on
    // (programmatic dependent launch of the split-KV merge); "" without --pdl (the environment's).
    std::string pdl{};
    // `--kernels k_from_v_rebuild[:e4m3]` (K-from-V variants): each call is wideattn_k_from_v_rebuild
    // into a dense bf16 K + V scratch (outside the timed pair only its allocation) followed by the
    // K + V prefill the dispatcher picks for the scratch, both timed.
    bool rebuild = false;
};

// The scale of the e4m3 pools (and the per-tensor scale of every e4m3 input the bench passes) by
// default: a power of two that puts the pool's N(0, 0.21^2) values mid-range in e4m3.
constexpr float kE4m3BenchScale = 1.0f / 256;

// The random inputs every case tiles from: bf16 values, and for e4m3 inputs the same values as
// e4m3 codes (two per 16-bit pool entry, no NaN), dequantised with e4m3_scale.
struct InputPools {
    std::vector<uint16_t> bf16, e4m3;
    float e4m3_scale = kE4m3BenchScale;
};

// The pools: bf16 always, e4m3 (codes of value / e4m3_scale) when a variant reads e4m3 inputs.
InputPools make_pools(bool any_e4m3, float e4m3_scale = kE4m3BenchScale);

// The device side of one timed case.
struct CaseBuffers {
    DeviceBuffer q, k, v, o, lse, cu, seq_k, table;
    DeviceBuffer q_scale, k_scale, v_scale;
    DeviceBuffer workspace;  // split-KV scratch (allocated by attach_workspace when the call splits)
    DeviceBuffer k_norm;     // the k_norm weights of a K-from-V variant
    DeviceBuffer cos_sin;    // its cos / sin table (BenchVariant::cos_sin_table)
    wideattn_k_from_v k_from_v{};  // its description (the call's params.k_from_v points here)
};

// Allocates and fills the buffers of case number `c` (Q, K and V tiled from the pools at
// case-dependent offsets, the output poisoned). Returns "" or the first error.
std::string upload_case(const GpuDevice& gpu, const HostProblem& h, size_t c, const BenchVariant& variant,
                        bool reference, const InputPools& pools, CaseBuffers* b);

// The addresses a case's call names: its device buffers for a timed call (case_params), or
// addresses nothing reads for a plan made from the shapes alone (`wideattn plan`).
struct CaseAddresses {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* o = nullptr;
    void* lse = nullptr;
    const int32_t* cu_seqlens_q = nullptr;
    const int32_t* seq_lens_k = nullptr;
    const int32_t* block_table = nullptr;
    const float* q_scale = nullptr;
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
    const wideattn_k_from_v* k_from_v = nullptr;  // the description of a K-from-V variant
};

// The prefill call of one case at `a` with the variant's dtypes, layout and flags, the
// max_seqlen_q / max_seqlen_k hints and no workspace.
wideattn_prefill_params variant_params(const HostProblem& h, const CaseAddresses& a, const BenchVariant& variant,
                                       bool reference);

// variant_params on the case's buffers.
wideattn_prefill_params case_params(const HostProblem& h, const CaseBuffers& b, const BenchVariant& variant,
                                    bool reference);

// Sizes the split-KV workspace of *p with wideattn_workspace_size on the current device, allocates
// it once into b->workspace (nothing when the call does not split) and points p->workspace /
// p->workspace_bytes at it. Returns "" or the error.
std::string attach_workspace(const wideattn_context* ctx, const GpuDevice& gpu, wideattn_prefill_params* p,
                             CaseBuffers* b);

}  // namespace wideattn::cli
