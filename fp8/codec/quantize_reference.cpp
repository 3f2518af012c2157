// quantize_reference.cpp - see quantize_reference.h.
#include "fp8/codec/quantize_reference.h"

#include <cmath>

#include "accuracy/bf16.h"
#include "fp8/codec/e4m3.h"
#include "kernels/common/v_transposed.h"

namespace wideattn::fp8 {

float e4m3_scale_for_amax(float amax) {
    return amax > 0.0f && std::isfinite(amax) ? e4m3_scale_for_finite_amax(amax) : kE4m3MinScale;
}

float bf16_amax(const uint16_t* values, int64_t count, int64_t* nonfinite, int64_t* first_nonfinite) {
    float amax = 0.0f;
    *nonfinite = 0;
    *first_nonfinite = -1;
    for (int64_t i = 0; i < count; ++i) {
        const float x = bf16_to_float(values[i]);
        if (!std::isfinite(x)) {
            if ((*nonfinite)++ == 0) *first_nonfinite = i;
            continue;
        }
        amax = std::fmax(amax, std::fabs(x));
    }
    return amax;
}

std::string scale_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                            int64_t src_token_stride, int64_t src_head_stride, const int64_t* slot_mapping,
                            ScaleReport* report) {
    if (!src || !report) return "scale_reference: src or report is null";
    if (tokens < 0 || heads < 1 || head_dim < 1)
        return "scale_reference: tokens=" + std::to_string(tokens) + ", heads=" + std::to_string(heads) +
               ", head_dim=" + std::to_string(head_dim) + " out of range";
    *report = ScaleReport{};
    for (int64_t t = 0; t < tokens; ++t) {
        if (slot_mapping && slot_mapping[t] < 0) continue;
        for (int64_t h = 0; h < heads; ++h) {
            int64_t nonfinite = 0, first = -1;
            const float amax = bf16_amax(src + t * src_token_stride + h * src_head_stride, head_dim, &nonfinite, &first);
            report->amax = std::fmax(report->amax, amax);
            if (nonfinite && report->nonfinite == 0) report->first_nonfinite = (t * heads + h) * head_dim + first;
            report->nonfinite += nonfinite;
        }
    }
    report->scale = e4m3_scale_for_amax(report->amax);
    return {};
}

std::string quantize_to_cache_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                                        int64_t src_token_stride, int64_t src_head_stride,
                                        const int64_t* slot_mapping, float scale, const CacheLayout& layout,
                                        uint8_t* cache, QuantizeReport* report) {
    if (!src || !cache || !report) return "quantize_to_cache_reference: a pointer argument is null";
    if (tokens < 0 || heads < 1 || head_dim < 1)
        return "quantize_to_cache_reference: tokens=" + std::to_string(tokens) + ", heads=" + std::to_string(heads) +
               ", head_dim=" + std::to_string(head_dim) + " out of range";
    if (!(scale > 0.0f) || !std::isfinite(scale))
        return "quantize_to_cache_reference: scale=" + std::to_string(scale) + " must be finite and > 0";
    if (layout.block_size < 1 || layout.num_blocks < 1)
        return "quantize_to_cache_reference: block_size=" + std::to_string(layout.block_size) +
               ", num_blocks=" + std::to_string(layout.num_blocks) + " must be >= 1";
    if (layout.v_transposed && layout.block_size % kVGroupSlots != 0)
        return "quantize_to_cache_reference: block_size=" + std::to_string(layout.block_size) +
               " is not a multiple of " + std::to_string(kVGroupSlots) + " (the transposed V layout)";
    if (!slot_mapping && tokens > layout.num_blocks * layout.block_size)
        return "quantize_to_cache_reference: tokens=" + std::to_string(tokens) + " do not fit in the cache (" +
               std::to_string(layout.num_blocks * layout.block_size) + " slots) with the identity slot mapping";
    for (int64_t t = 0; slot_mapping && t < tokens; ++t)
        if (slot_mapping[t] >= layout.num_blocks * layout.block_size)
            return "quantize_to_cache_reference: slot_mapping[" + std::to_string(t) + "]=" +
                   std::to_string(slot_mapping[t]) + " is past the cache (" +
                   std::to_string(layout.num_blocks * layout.block_size) + " slots)";
    *report = QuantizeReport{};
    const float inverse_scale = 1.0f / scale;
    for (int64_t t = 0; t < tokens; ++t) {
        const int64_t slot = slot_mapping ? slot_mapping[t] : t;
        if (slot < 0) continue;
        const int64_t block = slot / layout.block_size;
        const int32_t in_block = static_cast<int32_t>(slot % layout.block_size);
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < head_dim; ++d) {
                const float x = bf16_to_float(src[t * src_token_stride + h * src_head_stride + d]);
                bool nonfinite = false;
                const float scaled = x * inverse_scale;
                const uint8_t code = e4m3_quantize(x, inverse_scale, &nonfinite);
                if (nonfinite) {
                    if (report->nonfinite++ == 0) report->first_nonfinite = (t * heads + h) * head_dim + d;
                } else if (std::fabs(scaled) > kE4m3Max) {
                    ++report->saturated;
                }
                const int64_t offset =
                    layout.v_transposed
                        ? v_transposed_offset(block, in_block, h, static_cast<int32_t>(d), layout.block_stride,
                                              layout.head_stride, static_cast<int32_t>(layout.block_size))
                        : block * layout.block_stride + in_block * layout.slot_stride + h * layout.head_stride + d;
                cache[offset] = code;
            }
    }
    return {};
}

std::string quantize_flat_reference(const uint16_t* src, int64_t tokens, int64_t heads, int64_t head_dim,
                                    int64_t src_token_stride, int64_t src_head_stride, float scale,
                                    int64_t dst_token_stride, int64_t dst_head_stride, uint8_t* dst,
                                    QuantizeReport* report) {
    CacheLayout layout;
    layout.num_blocks = tokens > 0 ? tokens : 1;
    layout.block_size = 1;
    layout.block_stride = dst_token_stride;
    layout.slot_stride = dst_token_stride;  // unused: slot % 1 == 0
    layout.head_stride = dst_head_stride;
    return quantize_to_cache_reference(src, tokens, heads, head_dim, src_token_stride, src_head_stride, nullptr, scale,
                                       layout, dst, report);
}

}  // namespace wideattn::fp8
