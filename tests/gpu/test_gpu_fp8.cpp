// test_gpu_fp8.cpp - the e4m3 quantise-into-cache kernel (build/fp8/quantize_e4m3.<arch>.cubin,
// not yet behind the C API) against the CPU reference, bit for bit, on a paged cache with a
// shuffled slot mapping, padding tokens, NaN/inf inputs and saturating values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/quantize/quantize_params.h"
#include "fp8/quantize/quantize_traits.h"
#include "fp8/quantize_reference.h"
#include "tests/gpu/gpu_fixture.h"

using namespace wideattn;
using wideattn::test::gpu;

namespace {

constexpr unsigned char kCachePoison = 0xA5;

// Loads build/fp8/quantize_e4m3.<arch>.cubin for the device (arch-specific name first).
std::string load_quantize_kernel(CUmodule* module, CUfunction* function) {
    const GpuSession& s = *gpu().session;
    const char* dir = std::getenv("WIDEATTN_FP8_CUBIN_DIR");
    if (!dir) return "WIDEATTN_FP8_CUBIN_DIR is not set (tests/meson.build sets it)";
    const std::string arch = "sm_" + std::to_string(s.cc_major()) + std::to_string(s.cc_minor());
    std::string image;
    for (const std::string& name : {arch + "a", arch}) {
        std::ifstream in(std::string(dir) + "/quantize_e4m3." + name + ".cubin", std::ios::binary);
        if (in) {
            image.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            break;
        }
    }
    if (image.empty()) return "no quantize_e4m3 cubin for " + arch + " in " + dir;
    std::string err = s.check(s.driver().cuModuleLoadData(module, image.data()), "cuModuleLoadData");
    if (err.empty())
        err = s.check(s.driver().cuModuleGetFunction(function, *module, fp8::QuantizeE4m3Traits::kSymbol),
                      "cuModuleGetFunction");
    return err;
}

}  // namespace

TEST_CASE("gpu fp8: quantise into the paged cache equals the CPU reference bit for bit") {
    const GpuSession& s = *gpu().session;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    const std::string load_error = load_quantize_kernel(&module, &function);
    REQUIRE_MESSAGE(load_error.empty(), load_error);

    const int32_t tokens = 37, heads = 4, head_dim = 512, block_size = 16, num_blocks = 5;
    std::mt19937 rng(static_cast<uint32_t>(std::time(nullptr)));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<uint16_t> src(static_cast<size_t>(tokens) * heads * head_dim);
    for (auto& x : src) x = float_to_bf16(normal(rng));
    src[5] = float_to_bf16(NAN);
    src[4000] = float_to_bf16(-INFINITY);
    src[9000] = float_to_bf16(1e4f);  // saturates
    std::vector<int64_t> slots(num_blocks * block_size);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(tokens);
    slots[3] = -1;  // padding tokens write nothing
    slots[20] = -1;
    int64_t nonfinite_inputs = 0, first = -1;
    const float scale = fp8::e4m3_scale_for_amax(
        fp8::bf16_amax(src.data(), static_cast<int64_t>(src.size()), &nonfinite_inputs, &first) / 4);

    fp8::CacheLayout layout;
    layout.num_blocks = num_blocks;
    layout.block_size = block_size;
    layout.head_stride = head_dim;
    layout.slot_stride = int64_t{heads} * head_dim;
    layout.block_stride = block_size * layout.slot_stride;
    std::vector<uint8_t> want(static_cast<size_t>(num_blocks * layout.block_stride), kCachePoison);
    fp8::QuantizeReport report;
    REQUIRE(fp8::quantize_to_cache_reference(src.data(), tokens, heads, head_dim, int64_t{heads} * head_dim, head_dim,
                                             slots.data(), scale, layout, want.data(), &report)
                .empty());

    DeviceBuffer d_src, d_cache, d_slots, d_scale, d_count;
    REQUIRE(d_src.allocate(s, src.size() * 2).empty());
    REQUIRE(d_src.upload(src.data(), src.size() * 2).empty());
    REQUIRE(d_cache.allocate(s, want.size()).empty());
    REQUIRE(d_cache.fill(kCachePoison).empty());
    REQUIRE(d_slots.allocate(s, slots.size() * 8).empty());
    REQUIRE(d_slots.upload(slots.data(), slots.size() * 8).empty());
    REQUIRE(d_scale.allocate(s, 4).empty());
    REQUIRE(d_scale.upload(&scale, 4).empty());
    REQUIRE(d_count.allocate(s, 4).empty());
    REQUIRE(d_count.fill(0).empty());

    wideattn_quantize_params p{};
    p.src = d_src.get();
    p.src_token_stride = int64_t{heads} * head_dim;
    p.src_head_stride = head_dim;
    p.cache = d_cache.get();
    p.cache_block_stride = layout.block_stride;
    p.cache_slot_stride = layout.slot_stride;
    p.cache_head_stride = layout.head_stride;
    p.slot_mapping = static_cast<const int64_t*>(d_slots.get());
    p.scale = static_cast<const float*>(d_scale.get());
    p.nonfinite_count = static_cast<int32_t*>(d_count.get());
    p.tokens = tokens;
    p.heads = heads;
    p.head_dim = head_dim;
    p.block_size = block_size;
    p.num_blocks = num_blocks;
    void* args[] = {&p};
    using Traits = fp8::QuantizeE4m3Traits;
    const unsigned grid_y = static_cast<unsigned>((heads * head_dim + Traits::kElemsPerBlock - 1) / Traits::kElemsPerBlock);
    REQUIRE(s.check(s.driver().cuLaunchKernel(function, tokens, grid_y, 1, Traits::kThreads, 1, 1, 0, nullptr, args,
                                              nullptr),
                    "cuLaunchKernel")
                .empty());
    REQUIRE(s.check(s.driver().cuCtxSynchronize(), "quantize kernel").empty());
    std::vector<uint8_t> got(want.size());
    REQUIRE(d_cache.download(got.data(), got.size()).empty());
    int32_t count = -1;
    REQUIRE(d_count.download(&count, 4).empty());
    s.driver().cuModuleUnload(module);

    size_t mismatches = 0;
    for (size_t i = 0; i < want.size(); ++i) mismatches += got[i] != want[i];
    CHECK(mismatches == 0);
    CHECK(count == report.nonfinite);
    CHECK(report.nonfinite == 2);
    CHECK(report.saturated > 0);
}
