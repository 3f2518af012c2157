// quantize_e4m3_kernel.cu - bf16 -> e4m3 into the paged KV cache (the "store K/V into the
// cache" step of an engine), one block row per token, 8 elements per thread. Conversion is
// fp8/codec/e4m3.h's e4m3_quantize, so the result equals fp8/codec/quantize_reference.cpp bit for
// bit. With WIDEATTN_FLAG_V_TRANSPOSED the codes go to the transposed V layout instead
// (kernels/common/v_transposed.h): one byte per dim row, a block-uniform branch on the flags.
//
// Q (a flat [token][head][d] destination) goes through this same kernel with slot_mapping NULL
// (slot = token) and block_size 1: the flat layout is the paged one with one slot per block, so
// a second kernel would repeat the conversion, the vector widths, the grid and the dispatcher
// path for one different address line; the mode costs a block-uniform branch on a pointer.
#include <cstdint>
#include <cuda_bf16.h>

#include "fp8/codec/e4m3.h"
#include "wideattn.h"
#include "fp8/quantize/quantize_traits.h"
#include "kernels/common/v_transposed.h"

extern "C" __global__ void __launch_bounds__(wideattn::fp8::QuantizeE4m3Traits::kThreads)
wideattn_quantize_e4m3_to_cache(const wideattn_quantize_params p) {
    using Traits = wideattn::fp8::QuantizeE4m3Traits;
    const int32_t token = blockIdx.x;
    if (token >= p.tokens) return;
    const int64_t slot = p.slot_mapping ? p.slot_mapping[token] : token;
    if (slot < 0 || slot >= static_cast<int64_t>(p.num_blocks) * p.block_size) return;
    const int32_t first = (blockIdx.y * Traits::kThreads + threadIdx.x) * Traits::kElemsPerThread;
    if (first >= p.heads * p.head_dim) return;
    const int32_t head = first / p.head_dim;
    const int32_t dim = first % p.head_dim;  // head_dim % 8 == 0: the 8 elements share a head

    const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.src) + token * p.src_token_stride +
                               head * p.src_head_stride + dim;
    const uint4 packed = *reinterpret_cast<const uint4*>(src);
    const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&packed);
    const float inverse_scale = 1.0f / *p.scale;
    uint8_t codes[Traits::kElemsPerThread];
    int32_t nonfinite = 0;
#pragma unroll
    for (int32_t i = 0; i < Traits::kElemsPerThread; ++i) {
        bool flagged = false;
        codes[i] = wideattn::fp8::e4m3_quantize(__bfloat162float(values[i]), inverse_scale, &flagged);
        nonfinite += flagged;
    }
    const int64_t block = slot / p.block_size;
    const int32_t in_block = static_cast<int32_t>(slot % p.block_size);
    uint8_t* cache = static_cast<uint8_t*>(p.cache);
    if (p.flags & WIDEATTN_FLAG_V_TRANSPOSED) {
        // The transposed V layout: each of the 8 dims is its own page row (block_size bytes apart).
#pragma unroll
        for (int32_t i = 0; i < Traits::kElemsPerThread; ++i)
            cache[wideattn::v_transposed_offset(block, in_block, head, dim + i, p.cache_block_stride,
                                                p.cache_head_stride, p.block_size)] = codes[i];
    } else {
        uint8_t* dst = cache + block * p.cache_block_stride + in_block * p.cache_slot_stride +
                       head * p.cache_head_stride + dim;
        *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(codes);
    }
    if (nonfinite && p.nonfinite_count) atomicAdd(p.nonfinite_count, nonfinite);
}
