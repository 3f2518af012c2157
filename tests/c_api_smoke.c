/* c_api_smoke.c - a plain C program using libwideattn (shared library, C header only):
 * opens the bundle, lists kernels, plans a split-KV decode call (wideattn_plan_launch needs no
 * driver), and on a machine without a driver gets NO_DRIVER from a launch and from
 * wideattn_workspace_size (with a GPU present it gets a result from the real driver instead). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "wideattn.h"

enum { kPlanSms = 132, kWorkspaceRounding = 256 };

static int64_t round_up(int64_t bytes) { return (bytes + kWorkspaceRounding - 1) / kWorkspaceRounding * kWorkspaceRounding; }

/* The workspace of S splits (docs/design.md "Split-KV"): S x total_q x num_q_heads fp32 rows of
 * head_dim, then one fp32 LSE per row, each region rounded up to 256 bytes. */
static int64_t workspace_formula(const wideattn_prefill_params* p, int32_t splits) {
    int64_t rows = (int64_t)splits * p->total_q * p->num_q_heads;
    return round_up(rows * p->head_dim * (int64_t)sizeof(float)) + round_up(rows * (int64_t)sizeof(float));
}

/* The fp64 call does not split; the same call in bf16 as a decode over 4096 keys on an sm_90
 * device of kPlanSms SMs wants splits, runs unsplit without a workspace and split with one. */
static int check_split_plan(wideattn_context* ctx, const wideattn_prefill_params* f64) {
    wideattn_launch_plan plan;
    memset(&plan, 0, sizeof plan);
    if (wideattn_plan_launch(ctx, f64, 9, 0, kPlanSms, &plan) != WIDEATTN_OK || plan.num_splits != 1 ||
        plan.merge_kernel_index != -1) {
        fprintf(stderr, "fp64 plan: %s, %d splits\n", wideattn_last_error(), plan.num_splits);
        return 0;
    }
    wideattn_prefill_params p = *f64;
    p.o_dtype = WIDEATTN_DTYPE_BF16;
    p.max_seqlen_q = p.total_q;
    p.max_seqlen_k = 4096;
    if (wideattn_plan_launch(ctx, &p, 9, 0, kPlanSms, &plan) != WIDEATTN_OK) {
        fprintf(stderr, "bf16 plan: %s\n", wideattn_last_error());
        return 0;
    }
    printf("bf16 decode plan: kernel %d, %d splits without a workspace, %d preferred (%lld bytes)\n",
           plan.kernel_index, plan.num_splits, plan.preferred_splits, (long long)plan.workspace_bytes);
    if (plan.num_splits != 1 || plan.preferred_splits < 2 ||
        plan.workspace_bytes != workspace_formula(&p, plan.preferred_splits))
        return 0;
    p.workspace = (void*)0x60000000;
    p.workspace_bytes = plan.workspace_bytes;
    int32_t preferred = plan.preferred_splits;
    if (wideattn_plan_launch(ctx, &p, 9, 0, kPlanSms, &plan) != WIDEATTN_OK || plan.num_splits != preferred ||
        plan.merge_kernel_index < 0)
        return 0;
    wideattn_kernel_info merge;
    if (wideattn_get_kernel_info(ctx, plan.merge_kernel_index, &merge) != WIDEATTN_OK ||
        strcmp(merge.kind, "merge_splits") != 0)
        return 0;
    int64_t bytes = -1;
    wideattn_status status = wideattn_workspace_size(ctx, &p, &bytes);
    printf("workspace_size: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    return status == WIDEATTN_ERROR_NO_DRIVER;
}

int main(void) {
    wideattn_context* ctx = NULL;
    wideattn_status status = wideattn_open(&ctx, NULL); /* WIDEATTN_BUNDLE from the test env */
    if (status != WIDEATTN_OK) {
        fprintf(stderr, "open failed: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
        return 1;
    }
    int32_t count = wideattn_kernel_count(ctx);
    for (int32_t i = 0; i < count; ++i) {
        wideattn_kernel_info info;
        if (wideattn_get_kernel_info(ctx, i, &info) != WIDEATTN_OK) return 1;
        printf("%s %s %d threads %d bytes smem\n", info.name, info.arch, info.threads, info.dynamic_smem);
    }
    wideattn_prefill_params p;
    memset(&p, 0, sizeof p);
    p.q = (const void*)0x10000000; p.k_cache = (const void*)0x20000000; p.v_cache = (const void*)0x30000000;
    p.o = (void*)0x40000000;
    p.cu_seqlens_q = (const int32_t*)0x50000000; p.seq_lens_k = (const int32_t*)0x50001000;
    p.block_table = (const int32_t*)0x50002000; p.block_table_stride = 4;
    p.q_token_stride = 32 * 512; p.q_head_stride = 512;
    p.k_block_stride = p.v_block_stride = 16 * 4 * 512;
    p.k_slot_stride = p.v_slot_stride = 4 * 512;
    p.k_head_stride = p.v_head_stride = 512;
    p.o_token_stride = 32 * 512; p.o_head_stride = 512;
    p.num_seqs = 1; p.total_q = 10; p.num_q_heads = 32; p.num_kv_heads = 4; p.head_dim = 512;
    p.block_size = 16; p.num_blocks = 4;
    p.q_dtype = WIDEATTN_DTYPE_BF16; p.kv_dtype = WIDEATTN_DTYPE_BF16; p.o_dtype = WIDEATTN_DTYPE_F64;
    p.softmax_scale = 1.0f;
    status = wideattn_prefill(ctx, &p, NULL);
    printf("prefill: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    int ok = status == WIDEATTN_ERROR_NO_DRIVER && strstr(wideattn_last_error(), "CUDA driver not available");
    /* The per-tensor e4m3 scale of a bf16 [10][4][512] tensor, every token counted. */
    wideattn_scale_params sp;
    memset(&sp, 0, sizeof sp);
    sp.src = (const void*)0x10000000; sp.src_token_stride = 4 * 512; sp.src_head_stride = 512;
    sp.scale = (float*)0x30001000;
    sp.tokens = 10; sp.heads = 4; sp.head_dim = 512; sp.src_dtype = WIDEATTN_DTYPE_BF16;
    status = wideattn_compute_scale(ctx, &sp, NULL);
    printf("compute_scale: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    ok = ok && status == WIDEATTN_ERROR_NO_DRIVER;
    status = wideattn_compute_scale_pow2(ctx, &sp, NULL);
    printf("compute_scale_pow2: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    ok = ok && status == WIDEATTN_ERROR_NO_DRIVER;
    ok = ok && check_split_plan(ctx, &p);
    /* Plans need the driver too (the kernels' functions are resolved at creation); a handle that
     * no wideattn_plan_create returned is refused without one. */
    wideattn_plan* plan = (wideattn_plan*)0x1;
    status = wideattn_plan_create(ctx, &p, NULL, &plan);
    printf("plan_create: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    ok = ok && status == WIDEATTN_ERROR_NO_DRIVER && plan == NULL;
    status = wideattn_plan_run((const wideattn_plan*)0x100000001ull, p.q, p.k_cache, p.v_cache, p.o, NULL, NULL);
    printf("plan_run: %s: %s\n", wideattn_status_string(status), wideattn_last_error());
    ok = ok && status == WIDEATTN_ERROR_INVALID_ARGUMENT && strstr(wideattn_last_error(), "is not a plan");
    wideattn_close(ctx);
    /* The test runs with WIDEATTN_LIBCUDA pointing nowhere: the no-driver path is expected. */
    return ok ? 0 : 1;
}
