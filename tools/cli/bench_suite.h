// bench_suite.h - what `wideattn bench` and `wideattn tune` share: the Gemma 4 31B global-layer
// cases (the prefill suite, docs/design.md section 7, and the decode cases), the random input
// pools, the device buffers and params of one case, and CUDA-event timing.
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

struct BenchCase {
    std::string name;
    std::vector<int32_t> q_lens, contexts;
    int32_t hq = 32, hkv = 4;
};

// The prefill suite (what `wideattn bench` runs by default).
std::vector<BenchCase> gemma4_suite();

// The decode cases: many sequences of 1 to 4 new tokens after long contexts (total_q <= 8 per
// sequence, the decode class of docs/design.md); `wideattn bench` runs them when --cases names them.
std::vector<BenchCase> gemma4_decode_suite();

// The cases a comma-separated `list` names, looked up in the prefill and decode suites, in list
// order; false after printing "wideattn COMMAND: --cases: unknown case 'NAME' (see HINT)".
bool named_cases(const std::string& list, const char* command, const char* hint, std::vector<BenchCase>* out);

// The host-side problem of case number `c` (shapes, index arrays and a shuffled block table; no data:
// the inputs are tiled from the random pool on the device).
HostProblem bench_problem(const BenchCase& bc, size_t c);

struct Timing {
    double median_ms = 0, min_ms = 0, p90_ms = 0;
};

Timing summarize(std::vector<float> ms);

// Times `launch` with CUDA events: warm-up, then `reps` individually timed runs.
template <typename Launch>
std::string time_launches(const GpuDevice& gpu, int warmup, int reps, Launch launch, Timing* out) {
    const Driver& d = gpu.driver();
    CUevent start = nullptr, stop = nullptr;
    std::string err = gpu.check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    if (err.empty()) err = gpu.check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<float> ms;
    for (int i = 0; err.empty() && i < warmup + reps; ++i) {
        err = gpu.check(d.cuEventRecord(start, nullptr), "cuEventRecord");
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
};

// The random inputs every case tiles from: bf16 values, and for e4m3 inputs the same values as
// e4m3 codes (two per 16-bit pool entry, no NaN), dequantised with kE4m3BenchScale.
struct InputPools {
    std::vector<uint16_t> bf16, e4m3;
};

// The pools: bf16 always, e4m3 when a variant reads e4m3 inputs.
InputPools make_pools(bool any_e4m3);

// The device side of one timed case.
struct CaseBuffers {
    DeviceBuffer q, k, v, o, lse, cu, seq_k, table;
    DeviceBuffer q_scale, k_scale, v_scale;
};

// Allocates and fills the buffers of case number `c` (Q, K and V tiled from the pools at
// case-dependent offsets, the output poisoned). Returns "" or the first error.
std::string upload_case(const GpuDevice& gpu, const HostProblem& h, size_t c, const BenchVariant& variant,
                        bool reference, const InputPools& pools, CaseBuffers* b);

// The prefill call of one case on its buffers.
wideattn_prefill_params case_params(const HostProblem& h, const CaseBuffers& b, const BenchVariant& variant,
                                    bool reference);

}  // namespace wideattn::cli
