/* c_api_smoke.c - a plain C program using libwideattn (shared library, C header only):
 * opens the bundle, lists kernels, and on a machine without a driver gets NO_DRIVER from a
 * launch (with a GPU present it gets a result from the real driver instead). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "wideattn.h"

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
    wideattn_close(ctx);
    /* The test runs with WIDEATTN_LIBCUDA pointing nowhere: the no-driver path is expected. */
    return ok ? 0 : 1;
}
