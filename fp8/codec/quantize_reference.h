// quantize_reference.h - CPU reference of the 8-bit quantisation step of an engine: the
// per-tensor scale of a bf16 tensor (from its amax), and bf16 K/V (or Q) -> e4m3 with a float
// scale, written into the paged KV-cache layout through a slot mapping (or, for Q, into a flat
// strided destination). The GPU kernels are checked against it bit for bit.
#pragma once

#include <cstdint>
#include <string>

namespace wideattn::fp8 {

// Scale that maps amax onto the largest e4m3 value: amax / 448, never below kE4m3MinScale
// (2^-126, fp8/codec/e4m3.h), which an all-zero tensor gets (it still round-trips: its codes are 0).
// A non-finite or negative amax (bf16_amax never returns one) also gives kE4m3MinScale.
// Dequantise as code_value * scale.
float e4m3_scale_for_amax(float amax);

// Largest |x| over a bf16 tensor of `count` elements; NaN/inf are skipped and counted in
// *nonfinite (first flat index in *first_nonfinite, -1 if none).
float bf16_amax(const uint16_t* values, int64_t count, int64_t* nonfinite, int64_t* first_nonfinite);

struct CacheLayout {
    int64_t num_blocks = 0;
    int64_t block_size = 0;     // slots per block
    int64_t block_stride = 0;   // elements (bytes, for e4m3) between blocks
    int64_t slot_stride = 0;
    int64_t head_stride = 0;
    // The transposed V layout (WIDEATTN_FLAG_V_TRANSPOSED, kernels/common/v_transposed.h):
    // cache[block][head][d][v_slot_position(slot)], page rows of block_size bytes (a multiple of
    // 16); slot_stride is then unused.
    bool v_transposed = false;
};

struct QuantizeReport {
    int64_t nonfinite = 0;         // NaN/inf inputs (stored as e4m3 NaN)
    int64_t first_nonfinite = -1;  // flat source index token * heads * head_dim + head * head_dim + d
    int64_t saturated = 0;         // finite inputs whose |x / scale| exceeded 448
};

struct ScaleReport {
    float scale = 0.0f;            // e4m3_scale_for_amax(amax)
    float amax = 0.0f;             // largest finite |x| over the tokens read
    int64_t nonfinite = 0;         // NaN/inf inputs (skipped by the max)
    int64_t first_nonfinite = -1;  // flat source index, as in QuantizeReport
};

// The per-tensor e4m3 scale of src[token][head][d] (bf16 bits, caller strides in elements):
// the amax over finite values of every token whose slot_mapping entry is >= 0 (slot_mapping
// NULL: every token), NaN/inf counted. What wideattn_compute_scale writes. Returns "" or an
// error naming the bad argument.
std::string scale_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                            int64_t src_token_stride, int64_t src_head_stride, const int64_t* slot_mapping,
                            ScaleReport* report);

// Quantises src[token][head][d] (bf16 bits, caller strides in elements) with `scale` into
// cache[slot / block_size][slot % block_size][head][d] (or the transposed V layout) for
// slot = slot_mapping[token];
// tokens with a negative slot are skipped (padding). slot_mapping NULL is the identity
// (slot = token; tokens must then fit in the cache). Returns "" or an error naming the bad
// argument (nothing written then).
std::string quantize_to_cache_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                                        int64_t src_token_stride, int64_t src_head_stride,
                                        const int64_t* slot_mapping, float scale, const CacheLayout& layout,
                                        uint8_t* cache, QuantizeReport* report);

// The flat destination (e.g. Q for a kernel that takes e4m3 Q): dst[token][head][d] at
// dst + token * dst_token_stride + head * dst_head_stride + d (bytes). It is the paged layout
// with one slot per block and the identity slot mapping, which is how wideattn_quantize_to_cache
// is called for it; this wrapper builds that layout.
std::string quantize_flat_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                                    int64_t src_token_stride, int64_t src_head_stride, float scale,
                                    int64_t dst_token_stride, int64_t dst_head_stride, uint8_t* dst,
                                    QuantizeReport* report);

}  // namespace wideattn::fp8
