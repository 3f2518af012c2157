// quantize_check.cpp - see quantize_check.h.
#include "tools/harness/quantize_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/codec/quantize_reference.h"

namespace wideattn {
namespace {

constexpr int32_t kTokens = 37;  // not a multiple of anything
constexpr int32_t kHeads = 4;
constexpr int32_t kHeadDim = 512;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 5;
constexpr unsigned char kCachePoison = 0xA5;
constexpr float kInputStd = 3.0f;
constexpr float kSaturatingValue = 1e4f;
constexpr float kAmaxFraction = 0.25f;  // scale for a quarter of amax: the outlier saturates

// Random bf16 inputs [token][head][d] with a NaN, a -inf and a value that saturates.
std::vector<uint16_t> random_source(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, kInputStd);
    std::vector<uint16_t> src(static_cast<size_t>(kTokens) * kHeads * kHeadDim);
    for (auto& x : src) x = float_to_bf16(normal(rng));
    src[5] = float_to_bf16(NAN);
    src[src.size() / 3] = float_to_bf16(-INFINITY);
    src[src.size() / 2] = float_to_bf16(kSaturatingValue);
    return src;
}

// A shuffled slot per token, two of them padding tokens (-1) that write nothing.
std::vector<int64_t> shuffled_slots(std::mt19937_64& rng) {
    std::vector<int64_t> slots(static_cast<size_t>(kNumBlocks) * kBlockSize);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(kTokens);
    slots[3] = -1;
    slots[20] = -1;
    return slots;
}

constexpr int64_t kSrcTokenStride = int64_t{kHeads} * kHeadDim;

// The engine layout [block][slot][head][d], or the transposed V layout [block][head][d][slot
// position] (WIDEATTN_FLAG_V_TRANSPOSED); both dense, the same bytes in all.
fp8::CacheLayout cache_layout(bool v_transposed) {
    fp8::CacheLayout layout;
    layout.num_blocks = kNumBlocks;
    layout.block_size = kBlockSize;
    layout.v_transposed = v_transposed;
    layout.head_stride = v_transposed ? int64_t{kHeadDim} * kBlockSize : kHeadDim;
    layout.slot_stride = v_transposed ? 1 : kSrcTokenStride;
    layout.block_stride = v_transposed ? kHeads * layout.head_stride : kBlockSize * layout.slot_stride;
    return layout;
}

// The case's device side: source, poisoned cache, slot mapping, scale and NaN/inf counter.
struct QuantizeBuffers {
    DeviceBuffer src, cache, slots, scale, count;
};

std::string upload_case(const GpuDevice& gpu, const std::vector<uint16_t>& src, const std::vector<int64_t>& slots,
                        float scale, size_t cache_bytes, QuantizeBuffers* d) {
    std::string err = d->src.allocate(gpu, src.size() * sizeof(uint16_t));
    if (err.empty()) err = d->src.upload(src.data(), src.size() * sizeof(uint16_t));
    if (err.empty()) err = d->cache.allocate(gpu, cache_bytes);
    if (err.empty()) err = d->cache.fill(kCachePoison);
    if (err.empty()) err = d->slots.allocate(gpu, slots.size() * sizeof(int64_t));
    if (err.empty()) err = d->slots.upload(slots.data(), slots.size() * sizeof(int64_t));
    if (err.empty()) err = d->scale.allocate(gpu, sizeof(float));
    if (err.empty()) err = d->scale.upload(&scale, sizeof(float));
    if (err.empty()) err = d->count.allocate(gpu, sizeof(int32_t));
    if (err.empty()) err = d->count.fill(0);
    return err;
}

wideattn_quantize_params quantize_params(const fp8::CacheLayout& layout, const QuantizeBuffers& d) {
    wideattn_quantize_params p{};
    p.src = d.src.get();
    p.src_token_stride = kSrcTokenStride;
    p.src_head_stride = kHeadDim;
    p.cache = d.cache.get();
    p.cache_block_stride = layout.block_stride;
    p.cache_slot_stride = layout.slot_stride;
    p.cache_head_stride = layout.head_stride;
    p.slot_mapping = static_cast<const int64_t*>(d.slots.get());
    p.scale = static_cast<const float*>(d.scale.get());
    p.nonfinite_count = static_cast<int32_t*>(d.count.get());
    p.tokens = kTokens;
    p.heads = kHeads;
    p.head_dim = kHeadDim;
    p.block_size = kBlockSize;
    p.num_blocks = kNumBlocks;
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    p.flags = layout.v_transposed ? WIDEATTN_FLAG_V_TRANSPOSED : 0;
    return p;
}

// Manifest name of the bundle's quantise kernel (the last one listed).
std::string quantize_kernel_name(wideattn_context* ctx) {
    std::string name;
    for (int32_t i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info info{};
        wideattn_get_kernel_info(ctx, i, &info);
        if (std::string(info.kind) == "quantize_e4m3") name = info.name;
    }
    return name;
}

}  // namespace

QuantizeCaseResult run_quantize_case(const GpuDevice& gpu, wideattn_context* ctx, uint64_t seed, bool v_transposed) {
    QuantizeCaseResult result;
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> src = random_source(rng);
    const std::vector<int64_t> slots = shuffled_slots(rng);
    int64_t nonfinite = 0, first_nonfinite = -1;
    const float amax = fp8::bf16_amax(src.data(), static_cast<int64_t>(src.size()), &nonfinite, &first_nonfinite);
    const float scale = fp8::e4m3_scale_for_amax(amax * kAmaxFraction);

    const fp8::CacheLayout layout = cache_layout(v_transposed);
    std::vector<uint8_t> want(static_cast<size_t>(kNumBlocks * layout.block_stride), kCachePoison);
    fp8::QuantizeReport report;
    result.error = fp8::quantize_to_cache_reference(src.data(), kTokens, kHeads, kHeadDim, kSrcTokenStride,
                                                    kHeadDim, slots.data(), scale, layout, want.data(), &report);
    if (!result.error.empty()) return result;
    result.nonfinite_reference = report.nonfinite;
    result.saturated = report.saturated;

    QuantizeBuffers d;
    std::string& err = result.error;
    if (!(err = upload_case(gpu, src, slots, scale, want.size(), &d)).empty()) return result;
    const wideattn_quantize_params p = quantize_params(layout, d);
    const wideattn_status status = wideattn_quantize_to_cache(ctx, &p, nullptr);
    if (status != WIDEATTN_OK) {
        err = std::string(wideattn_status_string(status)) + ": " + wideattn_last_error();
        return result;
    }
    if ((err = gpu.check(gpu.driver().cuCtxSynchronize(), "quantize kernel execution")).size()) return result;
    result.kernel = quantize_kernel_name(ctx);
    std::vector<uint8_t> got(want.size());
    if ((err = d.cache.download(got.data(), got.size())).size()) return result;
    if ((err = d.count.download(&result.nonfinite_device, sizeof(int32_t))).size()) return result;
    result.cache_bytes = static_cast<int64_t>(got.size());
    for (size_t i = 0; i < got.size(); ++i) result.mismatches += got[i] != want[i];
    return result;
}

}  // namespace wideattn
