// test_gpu_fp8.cpp - wideattn_quantize_to_cache (paged K/V, the transposed V layout, flat Q) and
// wideattn_compute_scale / wideattn_compute_scale_pow2 on the GPU against the CPU reference, bit for bit
// (tools/harness/quantize_check.h, tools/harness/scale_check.h), and their refusals on a GPU
// machine.
#include <doctest/doctest.h>

#include <ctime>
#include <string>

#include "tests/gpu/gpu_fixture.h"
#include "tools/harness/quantize_check.h"
#include "tools/harness/scale_check.h"

using namespace wideattn;
using wideattn::test::gpu;

TEST_CASE("gpu fp8: quantise into the paged cache equals the CPU reference bit for bit") {
    const QuantizeCaseResult r = run_quantize_case(*gpu().device, gpu().ctx, static_cast<uint64_t>(std::time(nullptr)));
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(r.kernel == "quantize_e4m3");
    CHECK(r.cache_bytes > 0);
    CHECK(r.mismatches == 0);
    CHECK(r.nonfinite_reference == 2);
    CHECK(r.nonfinite_device == r.nonfinite_reference);
    CHECK(r.saturated > 0);
}

TEST_CASE("gpu fp8: quantise into the transposed V layout equals the CPU reference bit for bit") {
    const QuantizeCaseResult r =
        run_quantize_case(*gpu().device, gpu().ctx, static_cast<uint64_t>(std::time(nullptr)), true);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(r.kernel == "quantize_e4m3");
    CHECK(r.cache_bytes > 0);
    CHECK(r.mismatches == 0);
    CHECK(r.nonfinite_reference == 2);
    CHECK(r.nonfinite_device == r.nonfinite_reference);
}

TEST_CASE("gpu fp8: bad quantise arguments are refused on a GPU machine too") {
    wideattn_quantize_params p{};
    CHECK(wideattn_quantize_to_cache(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "src is NULL");
}

TEST_CASE("gpu fp8: amax -> scale -> quantise on one stream, flat Q and scale edge cases equal the CPU reference") {
    const ScaleCaseResult r = run_scale_case(*gpu().device, gpu().ctx, static_cast<uint64_t>(std::time(nullptr)));
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(r.kernel == "amax_e4m3");
    CHECK(r.pow2_kernel == "amax_e4m3_pow2");
    // K: amax, its count, a second run, cache, its count, the power of two and its count; Q: amax,
    // its count, 2 scales x (bytes, count); edges: 3 tensors x (scale, reference is the floor,
    // count, the power of two and its count).
    CHECK(r.comparisons == 7 + 2 + 4 + 15);
    for (const std::string& failure : r.failures) FAIL_CHECK(failure);
    CHECK(r.nonfinite_inputs == 2);   // the padding token's NaN is not counted
    CHECK(r.saturated_q > 0);
    CHECK(r.scale_bits != 0xFFFFFFFFu);  // the poison was overwritten
}

TEST_CASE("gpu fp8: bad compute_scale arguments are refused on a GPU machine too, before any write") {
    wideattn_scale_params p{};
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    CHECK(wideattn_compute_scale(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "src is NULL");
    CHECK(wideattn_compute_scale_pow2(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "src is NULL");
}
