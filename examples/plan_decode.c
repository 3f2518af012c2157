/*
 * plan_decode.c - one decode step of a Gemma 4 31B-shaped model's global layers through the C API's
 * plans: the step's metadata is planned once, then the plan runs once per layer, each layer with
 * its own K/V cache. A complete program over the CUDA driver API:
 *
 *   cc plan_decode.c $(pkg-config --cflags --libs wideattn) -lcuda -o plan_decode
 *   ./plan_decode                  # WIDEATTN_BUNDLE names the bundle when it is not the installed one
 *
 * The tests build it against the stand-in driver (tests/fake_driver/) and run it there; on a GPU
 * it runs the kernels (the inputs are zeros: the point is the calls, not the numbers).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wideattn.h>

enum { LAYERS = 10, SEQS = 4, CONTEXT = 256, HQ = 32, HKV = 4, D = 512, PAGE = 16 };
enum { PAGES_PER_SEQ = CONTEXT / PAGE, BLOCKS = SEQS * PAGES_PER_SEQ };

#define CU_CHECK(call)                                                        \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: CUresult %d\n", #call, (int)r_);      \
            return 1;                                                         \
        }                                                                     \
    } while (0)

#define WA_CHECK(call)                                                        \
    do {                                                                      \
        wideattn_status s_ = (call);                                          \
        if (s_ != WIDEATTN_OK) {                                              \
            fprintf(stderr, "%s: %s: %s\n", #call, wideattn_status_string(s_), \
                    wideattn_last_error());                                   \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static CUresult alloc_zeroed(CUdeviceptr* ptr, size_t bytes) {
    CUresult r = cuMemAlloc(ptr, bytes);
    return r == CUDA_SUCCESS ? cuMemsetD8(*ptr, 0, bytes) : r;
}

int main(void) {
    CUdevice device;
    CUcontext cu_ctx;
    CUstream stream;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&device, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&cu_ctx, device));
    CU_CHECK(cuCtxSetCurrent(cu_ctx));
    CU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    /* The model's tensors: q and o of the step, one K and one V cache per layer. */
    const size_t bf16 = 2;
    const size_t cache_bytes = (size_t)BLOCKS * PAGE * HKV * D * bf16;
    CUdeviceptr q, o, k_cache[LAYERS], v_cache[LAYERS];
    CU_CHECK(alloc_zeroed(&q, (size_t)SEQS * HQ * D * bf16));
    CU_CHECK(alloc_zeroed(&o, (size_t)SEQS * HQ * D * bf16));
    for (int l = 0; l < LAYERS; ++l) {
        CU_CHECK(alloc_zeroed(&k_cache[l], cache_bytes));
        CU_CHECK(alloc_zeroed(&v_cache[l], cache_bytes));
    }

    /* The step's metadata: SEQS sequences, one new token each after CONTEXT - 1 cached ones. */
    int32_t cu_seqlens_q[SEQS + 1], seq_lens_k[SEQS], block_table[SEQS * PAGES_PER_SEQ];
    for (int s = 0; s <= SEQS; ++s) cu_seqlens_q[s] = s;
    for (int s = 0; s < SEQS; ++s) seq_lens_k[s] = CONTEXT;
    for (int i = 0; i < SEQS * PAGES_PER_SEQ; ++i) block_table[i] = i;
    CUdeviceptr d_cu, d_lens, d_table;
    CU_CHECK(cuMemAlloc(&d_cu, sizeof cu_seqlens_q));
    CU_CHECK(cuMemAlloc(&d_lens, sizeof seq_lens_k));
    CU_CHECK(cuMemAlloc(&d_table, sizeof block_table));
    CU_CHECK(cuMemcpyHtoD(d_cu, cu_seqlens_q, sizeof cu_seqlens_q));
    CU_CHECK(cuMemcpyHtoD(d_lens, seq_lens_k, sizeof seq_lens_k));
    CU_CHECK(cuMemcpyHtoD(d_table, block_table, sizeof block_table));

    wideattn_context* ctx = NULL;
    WA_CHECK(wideattn_open(&ctx, NULL));

    wideattn_prefill_params p;
    memset(&p, 0, sizeof p);
    p.q = (const void*)q;  /* the run's tensors may be NULL in the plan; set here to size the workspace */
    p.q_token_stride = HQ * D;
    p.q_head_stride = D;
    p.k_cache = (const void*)k_cache[0];
    p.v_cache = (const void*)v_cache[0];
    p.k_block_stride = p.v_block_stride = PAGE * HKV * D;
    p.k_slot_stride = p.v_slot_stride = HKV * D;
    p.k_head_stride = p.v_head_stride = D;
    p.o = (void*)o;
    p.o_token_stride = HQ * D;
    p.o_head_stride = D;
    p.cu_seqlens_q = (const int32_t*)d_cu;
    p.seq_lens_k = (const int32_t*)d_lens;
    p.block_table = (const int32_t*)d_table;
    p.block_table_stride = PAGES_PER_SEQ;
    p.num_seqs = SEQS;
    p.total_q = SEQS;
    p.num_q_heads = HQ;
    p.num_kv_heads = HKV;
    p.head_dim = D;
    p.block_size = PAGE;
    p.num_blocks = BLOCKS;
    p.q_dtype = p.kv_dtype = p.o_dtype = WIDEATTN_DTYPE_BF16;
    p.softmax_scale = 1.0f;
    p.max_seqlen_q = 1;
    p.max_seqlen_k = CONTEXT;

    /* Split-KV workspace, allocated once (a decode step of 4 x 256 keys leaves SMs idle). */
    int64_t workspace_bytes = 0;
    WA_CHECK(wideattn_workspace_size(ctx, &p, &workspace_bytes));
    CUdeviceptr workspace = 0;
    if (workspace_bytes > 0) CU_CHECK(cuMemAlloc(&workspace, (size_t)workspace_bytes));
    p.workspace = (void*)workspace;
    p.workspace_bytes = workspace_bytes;

    /* Plan once per step: the caches of every layer are listed, so their tensor maps are encoded
     * now and no run encodes one. */
    const void* k_list[LAYERS];
    const void* v_list[LAYERS];
    for (int l = 0; l < LAYERS; ++l) k_list[l] = (const void*)k_cache[l], v_list[l] = (const void*)v_cache[l];
    wideattn_plan_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.num_caches = LAYERS;
    options.k_caches = k_list;
    options.v_caches = v_list;
    wideattn_plan* plan = NULL;
    WA_CHECK(wideattn_plan_create(ctx, &p, &options, &plan));

    wideattn_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    WA_CHECK(wideattn_plan_get_info(plan, &info));
    wideattn_kernel_info kernel;
    WA_CHECK(wideattn_get_kernel_info(ctx, info.launch.kernel_index, &kernel));

    /* Run per layer: only the layer's tensors change. */
    for (int l = 0; l < LAYERS; ++l)
        WA_CHECK(wideattn_plan_run(plan, (const void*)q, (const void*)k_cache[l], (const void*)v_cache[l], (void*)o,
                                   NULL, stream));
    CU_CHECK(cuStreamSynchronize(stream));
    printf("plan_decode: %d layers, kernel %s, %d split(s), %lld workspace bytes, %d cached map pair(s)\n", LAYERS,
           kernel.name, info.launch.num_splits, (long long)workspace_bytes, info.num_cached_maps);

    /* A destroyed plan is refused, not a crash. */
    WA_CHECK(wideattn_plan_destroy(plan));
    if (wideattn_plan_run(plan, (const void*)q, (const void*)k_cache[0], (const void*)v_cache[0], (void*)o, NULL,
                          stream) != WIDEATTN_ERROR_INVALID_ARGUMENT) {
        fprintf(stderr, "a destroyed plan ran\n");
        return 1;
    }
    printf("plan_decode: after destroy: %s\n", wideattn_last_error());

    wideattn_close(ctx);
    for (int l = 0; l < LAYERS; ++l) cuMemFree(k_cache[l]), cuMemFree(v_cache[l]);
    cuMemFree(q), cuMemFree(o), cuMemFree(d_cu), cuMemFree(d_lens), cuMemFree(d_table);
    if (workspace) cuMemFree(workspace);
    cuStreamDestroy(stream);
    cuDevicePrimaryCtxRelease(device);
    return 0;
}
