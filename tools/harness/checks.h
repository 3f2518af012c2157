// checks.h - runs one random problem through a kernel of the bundle (via wideattn_prefill,
// outputs poisoned first) and compares it with an fp64 reference: the CPU reference (Eigen)
// or the bundle's fp64 GPU kernel, which can be computed once for several kernels on the same
// inputs. Shared by `wideattn selftest` and the GPU test suite.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "accuracy/error_stats.h"
#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"

namespace wideattn {

// Pass bounds shared by `wideattn selftest` and the GPU suite.
// fp64 GPU kernel vs the CPU fp64 reference: only summation order differs.
constexpr double kFp64RelL2 = 1e-12;
constexpr double kFp64LseAbs = 1e-9;
// bf16 output of a bf16 kernel vs fp64: bf16 rounding alone gives ~2e-3.
constexpr double kBf16RelL2 = 1e-2;
constexpr double kFp32LseAbs = 1e-3;
// e4m3 K/V kernels vs fp64 on the same (dequantised) K/V: the kernel still rounds Q and P to
// e4m3 (3 mantissa bits, up to 6.25% per element), which the CPU model of the 8-bit kernel
// measured at 0.2% .. 10% relative L2 on stress inputs. 0.15 passes that and still catches a
// fragment-layout bug, which gives O(1) errors; whether the drift is acceptable is decided by
// the logit KL gate, not here. LSE moves with the rounded scores: checked for finiteness only.
// The same bound holds wgmma_e4m3kv_d512 (bf16 Q quantised in the kernel with one scale per
// 64-row block, amax / 448): a normal e4m3 code is within half its relative step, 2^-4, of q / scale,
// the per-element error of the mma-tier kernel's per-row-half Q scale; only elements below
// 2^-6 x scale (rows ~2^15 smaller than the block's largest) fall into subnormal codes and lose more.
constexpr double kE4m3RelL2 = 0.15;

// bf16 kernels on Gemma-like inputs (GemmaInputs): the mean absolute error against fp64 over the
// rounding floor, the mean absolute error of the fp64 output itself rounded to bf16 (which no
// bf16 output beats). With the softmax peaked, the output is carried by a few keys and rounding
// the largest P costs accuracy: in a float64 model of both kernels on these inputs (1k-4k keys),
// an online softmax that rescales whenever a row maximum grows (the largest P is exactly 1, as in
// the tuned Triton peer) stays at 1.01-1.09 x the floor, one whose P reaches 2^8 before it
// rescales (the lazy rescale of the BF16 kernels before 2026-12-01) at 1.09-1.36 x.
constexpr double kPeakedFloorRatio = 1.12;

enum class ReferenceKind { kCpu, kGpuF64 };

struct CaseResult {
    std::string error;               // non-empty: the case could not run (launch failed, ...)
    std::string kernel;              // manifest name of the kernel that ran
    accuracy::ErrorStats stats;      // output vs reference
    double floor_mean_abs = 0.0;     // mean |bf16(reference) - reference|: the output rounding floor
    double lse_max_abs = 0.0;        // max |lse - lse_ref| (0 when the problem has no lse)
    int64_t lse_nonfinite = 0;       // lse values that are NaN (-inf only where the reference has it)
    bool deterministic = true;       // a second run produced bit-identical output
    double flops = 0.0;
};

// One kernel of the bundle (by name) with a cubin that runs on the device.
struct RunnableKernel {
    std::string name;
    std::string kind;  // manifest kind: prefill, quantize_e4m3, amax_e4m3
    int32_t q_dtype, kv_dtype, o_dtype;
    bool v_transposed = false;  // reads V only in the transposed layout (feature "v_transposed")
    bool k_from_v_only = false; // serves only calls with WIDEATTN_FLAG_K_FROM_V (feature "k_from_v_only"):
                                // its problems need run_k_from_v_case
};

// The first entry of the bundle's kernel `name` (any arch) into *info; false when the bundle has
// no kernel of that name.
bool find_kernel_info(const wideattn_context* ctx, const std::string& name, wideattn_kernel_info* info);

// Whether the bundle's kernel `name` lists `feature` in its manifest features (false when the
// bundle has no kernel of that name).
bool kernel_has_feature(const wideattn_context* ctx, const std::string& name, const char* feature);

// Whether the bundle's kernel `name` reads V only in the transposed layout of
// WIDEATTN_FLAG_V_TRANSPOSED (its problems need ProblemSpec::v_transposed).
bool kernel_reads_transposed_v(const wideattn_context* ctx, const std::string& name);

// Whether the bundle's kernel `name` serves only calls with WIDEATTN_FLAG_K_FROM_V (feature
// "k_from_v_only": a K+V call never selects it, pinned or not).
bool kernel_k_from_v_only(const wideattn_context* ctx, const std::string& name);

// The query tokens per sequence up to which selection runs the bundle's kernel `name` on its own:
// 1 for a single_token kernel (total_q <= num_seqs), kFewTokensPerSeq for a few_tokens kernel
// (total_q <= 8 x num_seqs), 0 for a kernel without such a limit (kernels/common/kernel_desc.h).
int32_t kernel_alone_tokens_per_seq(const wideattn_context* ctx, const std::string& name);

// Whether selection would run kernel `name` on its own for a call of total_q query tokens over
// num_seqs sequences (pinned by name it serves any call).
bool kernel_serves_alone(const wideattn_context* ctx, const std::string& name, int64_t total_q, int64_t num_seqs);

// The bundle's kernels that have a cubin running on a cc_major.cc_minor device, one entry per
// name, in manifest order (selftest and the GPU suite run every one of them by name).
std::vector<RunnableKernel> runnable_kernels(const wideattn_context* ctx, int cc_major, int cc_minor);

// The error bound of decode_e4m3kfv_d512 (single-token K-from-V decode over an e4m3 V-only cache)
// against the fp64 kernel in the same mode: its Q and P stay f16 and its K is the reference's bf16
// K exactly (rounded at the steps of kernels/common/k_from_v.h, the same device cosf / sinf), so it
// is held to about 3x decode_e4m3_d512's measured rel L2 (1.39e-3 .. 1.69e-3 on the e4m3 shape list,
// fp8/decode_e4m3_d512/NOTES.md), not to kE4m3RelL2, which covers the kernels that quantise Q.
constexpr double kE4m3KFromVDecodeRelL2 = 5e-3;

// The error bound of decode_bf16kfv_d512 (the same over a BF16 V-only cache) against the fp64
// kernel in the same mode: its Q is bf16 as stored, its P bf16 as decode_bf16_d512's, its K the
// reference's bf16 K but where its cos / sin round differently (kernels/decode_bf16kfv_d512/NOTES.md):
// about 3x its measured rel L2 (1.35e-3 .. 1.69e-3 on the GPU tests' cases, H200, 2026-12-03),
// tighter than the BF16 kernels' general kBf16RelL2.
constexpr double kBf16KFromVDecodeRelL2 = 5e-3;

// The bound of a K-from-V-only decode kernel by its K/V dtype (one of the two above).
double k_from_v_decode_rel_l2(int32_t kv_dtype);

// The K-from-V description of the K-from-V checks: Gemma 4's (gemma4_k_from_v) with `rotary_dims`
// rotated dims and the device k_norm weights `k_norm_scale`.
wideattn_k_from_v k_from_v_check_description(const float* k_norm_scale, int32_t rotary_dims);

// A K-from-V case: `spec` run with WIDEATTN_FLAG_K_FROM_V, k_cache NULL and the description
// k_from_v_check_description(weights, rotary_dims), the weights random_k_norm_weights(head_dim,
// spec.seed + 1, `kind`), by the kernel ctx selects for o_dtype (twice, outputs poisoned first:
// bit identity), against the fp64 kernel in the same mode (on the exactly dequantised bf16 V when
// spec.e4m3_kv; the candidate reads the e4m3 codes).
CaseResult run_k_from_v_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec, int32_t o_dtype,
                             int32_t rotary_dims, KNormWeights kind = KNormWeights::kFp32);
// The same on a problem already made (e.g. with metadata altered after make_problem), with the
// caller's frequency table `inv_freq` (rotary_dims / 2 host values, uploaded) when not empty, and
// the cos / sin table `cos_sin` (k_from_v_cos_sin_table's entries for rotary_dims, uploaded; keys at
// positions past its rows take the formula) when not empty: the candidate and the fp64 kernel read
// the same tables.
CaseResult run_k_from_v_problem(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h, int32_t o_dtype,
                                int32_t rotary_dims, const std::vector<float>& inv_freq = {},
                                KNormWeights kind = KNormWeights::kFp32, const std::vector<uint32_t>& cos_sin = {});

// mean_abs / floor_mean_abs of a result (infinite when the floor is 0 and the error is not).
double floor_ratio(const CaseResult& r);

// The fp64 reference of one problem: the dense output, the LSE and the output's rounding floor.
struct Reference {
    std::vector<double> out, lse;
    double floor_mean_abs = 0.0;  // mean |bf16(out) - out| over the finite values
};

// The reference of `h` from the CPU reference (Eigen) or the bundle's fp64 GPU kernel (selected
// for the F64 output, whatever kernel ctx is restricted to). Returns "" or an error.
std::string compute_reference(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h,
                              ReferenceKind reference, Reference* out);

// Work on the candidate's device problem before its runs (its params may be replaced); "" or an error.
using PrepareCandidate = std::function<std::string(DeviceProblem*)>;

// Runs `h` twice with output dtype `o_dtype` through the kernel ctx selects and compares the first
// run with `ref` (computed once for every kernel run on the same inputs). With `kfv` the runs are
// K-from-V calls with that description (k_cache NULL); `prepare`, when set, runs once before them.
CaseResult run_against_reference(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h, int32_t o_dtype,
                                 const Reference& ref, const wideattn_k_from_v* kfv = nullptr,
                                 const PrepareCandidate& prepare = {});

// A K-from-V call of `spec` (description k_from_v_check_description(weights, rotary_dims), the
// weights of `kind`, bf16 out) served the prefill way: wideattn_k_from_v_rebuild into a dense bf16
// K + V scratch (poisoned first; the problem's table width in pages a sequence, the identity
// table), then the K + V call on it through the kernel ctx selects (twice: bit identity), against
// the fp64 kernel in K-from-V mode on the problem's V. The result's kernel is
// "k_from_v_rebuild+" and the K + V kernel's name.
CaseResult run_k_from_v_rebuild_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec,
                                     int32_t rotary_dims, KNormWeights kind = KNormWeights::kFp32);

// Makes `spec`'s problem, computes its reference and runs it (run_against_reference).
CaseResult run_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec, int32_t o_dtype,
                    ReferenceKind reference);

}  // namespace wideattn
