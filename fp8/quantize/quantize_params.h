/*
 * quantize_params.h - the argument of the e4m3 quantise-into-cache kernel (a plain C struct
 * passed by value, like wideattn_prefill_params), so the future C API entry and the kernel
 * share one definition.
 *
 * Semantics (the CPU reference is fp8/quantize_reference.h, bit for bit):
 *   cache[slot / block_size][slot % block_size][head][d] = e4m3(src[token][head][d] * (1 / *scale))
 * for slot = slot_mapping[token] >= 0 (negative slots are padding and skipped); RNE,
 * saturating to +-448; NaN/inf inputs are stored as e4m3 NaN and counted in *nonfinite_count.
 */
#ifndef WIDEATTN_QUANTIZE_PARAMS_H
#define WIDEATTN_QUANTIZE_PARAMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wideattn_quantize_params {
    const void* src;              /* bf16 [tokens][heads][head_dim], 16-byte aligned */
    int64_t src_token_stride;     /* elements, multiples of 8 */
    int64_t src_head_stride;
    void* cache;                  /* e4m3 bytes, 8-byte aligned */
    int64_t cache_block_stride;   /* bytes, multiples of 8 */
    int64_t cache_slot_stride;
    int64_t cache_head_stride;
    const int64_t* slot_mapping;  /* [tokens] */
    const float* scale;           /* device pointer to the dequantisation scale (> 0) */
    int32_t* nonfinite_count;     /* device counter, incremented per NaN/inf input; may be NULL */
    int32_t tokens;
    int32_t heads;
    int32_t head_dim;             /* multiple of 8 */
    int32_t block_size;
    int32_t num_blocks;
    int32_t reserved;             /* must be 0 */
} wideattn_quantize_params;

#ifdef __cplusplus
}
#endif

#endif /* WIDEATTN_QUANTIZE_PARAMS_H */
