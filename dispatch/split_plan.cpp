// split_plan.cpp - the split-KV planner (see split_plan.h).
#include "dispatch/split_plan.h"

#include <algorithm>
#include <string>

#include "dispatch/checked_math.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

WorkspaceLayout workspace_layout(const wideattn_prefill_params& p, int32_t splits) {
    constexpr int64_t kFloat = sizeof(float);
    WorkspaceLayout layout{INT64_MAX, INT64_MAX};  // a size no workspace reaches: never fits
    int64_t rows = 0, o_bytes = 0, lse_bytes = 0;
    if (!checked_mul(int64_t{splits} * p.total_q, p.num_q_heads, &rows) ||
        !checked_mul(rows, int64_t{p.head_dim} * kFloat, &o_bytes) || !checked_mul(rows, kFloat, &lse_bytes) ||
        o_bytes > INT64_MAX / 2 - kSplitWorkspaceAlign || lse_bytes > INT64_MAX / 2 - kSplitWorkspaceAlign)
        return layout;
    layout.lse_offset = split_workspace_round(o_bytes);  // = split_lse_offset, the kernels' view
    layout.bytes = layout.lse_offset + split_workspace_round(lse_bytes);
    return layout;
}

int64_t working_blocks(const ManifestKernel& kernel, const wideattn_prefill_params& p) {
    int64_t tiles = token_tile_count(p.total_q, p.num_seqs, kernel.tile_tokens);
    if (p.max_seqlen_q > 0)
        tiles = std::min<int64_t>(tiles, int64_t{p.num_seqs} * ceil_div(p.max_seqlen_q, kernel.tile_tokens));
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    return kernel.ctas_per_tile() * tiles * (p.num_q_heads / heads_per_block(group, kernel.heads_per_block_max));
}

int32_t preferred_splits(const ManifestKernel& kernel, const wideattn_prefill_params& p, int32_t num_sms) {
    if (p.num_splits > 0) return p.num_splits;
    if (!kernel.has_feature(kFeatureSplitKv) || p.total_q == 0 || num_sms < 1) return 1;
    const int64_t blocks = working_blocks(kernel, p);
    if (blocks == 0 || blocks >= num_sms) return 1;
    int32_t most = WIDEATTN_MAX_SPLITS;
    if (p.max_seqlen_k > 0) most = std::min<int32_t>(most, std::max(1, p.max_seqlen_k / WIDEATTN_MIN_SPLIT_KEYS));
    const auto efficiency = [&](int32_t splits) {
        const int64_t total = blocks * splits;
        const int64_t waves = (total + num_sms - 1) / num_sms;
        return static_cast<double>(total) / static_cast<double>(waves * num_sms);
    };
    double best = 0.0;
    for (int32_t s = 1; s <= most; ++s) best = std::max(best, efficiency(s));
    for (int32_t s = 1; s <= most; ++s)
        if (efficiency(s) >= kSplitEfficiencyShare * best) return s;
    return 1;
}

bool workspace_fits(const wideattn_prefill_params& p, int32_t splits) {
    if (splits == 1) return true;
    const int64_t needed = workspace_layout(p, splits).bytes;
    return needed == 0 || (p.workspace != nullptr && p.workspace_bytes >= needed);  // 0: an empty batch
}

int32_t fitting_splits(const wideattn_prefill_params& p, int32_t preferred) {
    int32_t s = preferred;
    while (!workspace_fits(p, s)) --s;
    return s;
}

std::string workspace_shortfall(const wideattn_prefill_params& p, int32_t splits) {
    return "workspace_bytes=" + std::to_string(p.workspace_bytes) + (p.workspace ? "" : " (workspace NULL)") +
           " is too small for num_splits=" + std::to_string(splits) + ": it needs " +
           std::to_string(workspace_layout(p, splits).bytes) + " bytes (wideattn_plan_launch / wideattn_workspace_size)";
}

std::string no_split_entry(const ManifestKernel& kernel, const wideattn_prefill_params& p) {
    return "num_splits=" + std::to_string(p.num_splits) + ": kernel " + kernel.name +
           " does not split keys (no \"split_kv\" feature); pass num_splits 0 or 1";
}

}  // namespace wideattn
