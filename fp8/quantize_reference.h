// quantize_reference.h - CPU reference of the 8-bit quantisation step of an engine: bf16
// K/V (or Q) -> e4m3 with a per-tensor float scale, written into the paged KV-cache layout
// through a slot mapping. The GPU quantisation kernels are checked against it bit for bit.
#pragma once

#include <cstdint>
#include <string>

namespace wideattn::fp8 {

// Scale that maps amax onto the largest e4m3 value: amax / 448 (1 when amax is 0, so an
// all-zero tensor still round-trips). Dequantise as code_value * scale.
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
};

struct QuantizeReport {
    int64_t nonfinite = 0;         // NaN/inf inputs (stored as e4m3 NaN)
    int64_t first_nonfinite = -1;  // flat source index token * heads * head_dim + head * head_dim + d
    int64_t saturated = 0;         // finite inputs whose |x / scale| exceeded 448
};

// Quantises src[token][head][d] (bf16 bits, caller strides in elements) with `scale` into
// cache[slot / block_size][slot % block_size][head][d] for slot = slot_mapping[token];
// tokens with a negative slot are skipped (padding). Returns "" or an error naming the
// bad argument (nothing written then).
std::string quantize_to_cache_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                                        int64_t src_token_stride, int64_t src_head_stride,
                                        const int64_t* slot_mapping, float scale, const CacheLayout& layout,
                                        uint8_t* cache, QuantizeReport* report);

}  // namespace wideattn::fp8
