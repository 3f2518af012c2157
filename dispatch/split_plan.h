// split_plan.h - the split-KV planner behind wideattn_plan_launch, wideattn_workspace_size and
// wideattn_prefill: how many key splits a call gets and the workspace they need, from host-known
// values only (never device data, so a call stays capturable in a CUDA graph). Pure functions:
// unit-testable on any machine. Rule and layout: docs/design.md "Split-KV".
#pragma once

#include <cstdint>
#include <string>

#include "dispatch/manifest.h"
#include "wideattn.h"

namespace wideattn {

// Feature of prefill kernels that take grid.z key splits and write partials (manifest "features").
constexpr const char* kFeatureSplitKv = "split_kv";

// A split count is taken when its wave efficiency (blocks / (waves x SMs)) reaches this share of
// the best count's: the smallest such count, so the merge reads no more partials than it must.
constexpr double kSplitEfficiencyShare = 0.95;

// The workspace of S splits (kernels/common/kernel_desc.h, split_lse_offset): partial O, fp32
// [S][total_q][num_q_heads][head_dim], then the partial LSE, fp32 [S][total_q][num_q_heads], each
// region rounded up to kSplitWorkspaceAlign bytes. Sizes that overflow int64 come back as INT64_MAX.
struct WorkspaceLayout {
    int64_t lse_offset;  // bytes from the workspace start to the LSE partials
    int64_t bytes;       // the whole workspace, a multiple of kWorkspaceAlign
};
WorkspaceLayout workspace_layout(const wideattn_prefill_params& p, int32_t splits);

// Blocks of the prefill grid that do work (token tiles x CTAs per tile x query-head groups), estimated on the host:
// the grid's token-tile bound, tightened by max_seqlen_q when given.
int64_t working_blocks(const ManifestKernel& kernel, const wideattn_prefill_params& p);

// The split count the planner wants for a kernel on a device of num_sms SMs (1 when the kernel
// cannot split or the call fills the machine). p.num_splits > 0 is returned as it is.
int32_t preferred_splits(const ManifestKernel& kernel, const wideattn_prefill_params& p, int32_t num_sms);

// Whether p's workspace holds `splits` splits (1 needs none, nor does an empty batch: 0 bytes).
bool workspace_fits(const wideattn_prefill_params& p, int32_t splits);

// The split count automatic planning runs: `preferred` (preferred_splits, or 1 where no merge
// kernel serves the call) reduced until its workspace fits p.workspace_bytes.
int32_t fitting_splits(const wideattn_prefill_params& p, int32_t preferred);

// The refusals of a forced p.num_splits: a workspace too small for `splits` (naming
// workspace_bytes and the bytes needed), and a kernel without a split entry.
std::string workspace_shortfall(const wideattn_prefill_params& p, int32_t splits);
std::string no_split_entry(const ManifestKernel& kernel, const wideattn_prefill_params& p);

}  // namespace wideattn
