// test_gpu_fp8.cpp - wideattn_quantize_to_cache on the GPU against the CPU reference, bit for
// bit (tools/harness/quantize_check.h), and its refusals on a GPU machine.
#include <doctest/doctest.h>

#include <ctime>
#include <string>

#include "tests/gpu/gpu_fixture.h"
#include "tools/harness/quantize_check.h"

using namespace wideattn;
using wideattn::test::gpu;

TEST_CASE("gpu fp8: quantise into the paged cache equals the CPU reference bit for bit") {
    const QuantizeCaseResult r = run_quantize_case(*gpu().session, gpu().ctx, static_cast<uint64_t>(std::time(nullptr)));
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(r.kernel == "quantize_e4m3");
    CHECK(r.cache_bytes > 0);
    CHECK(r.mismatches == 0);
    CHECK(r.nonfinite_reference == 2);
    CHECK(r.nonfinite_device == r.nonfinite_reference);
    CHECK(r.saturated > 0);
}

TEST_CASE("gpu fp8: bad quantise arguments are refused on a GPU machine too") {
    wideattn_quantize_params p{};
    CHECK(wideattn_quantize_to_cache(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "src is NULL");
}
