// test_gpu_tuning.cpp - on the GPU: a tuning file naming the kernel the priority order would not
// pick for a class makes wideattn_is_supported and wideattn_prefill run that kernel (its output
// bits are the pinned kernel's), and a file of another device name is ignored at launch.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/tuning.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/test_helpers.h"
#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"

namespace wideattn::test {
namespace {

constexpr int kStatusBytes = 4096;
constexpr uint64_t kTuningSeed = 4242;

// Opens the bundle with WIDEATTN_TUNING naming `file` (REQUIREd), then restores the variable.
wideattn_context* open_with_tuning(const std::string& file) {
    const char* old = std::getenv(kTuningPathEnv);
    const std::string saved = old ? old : "";
    setenv(kTuningPathEnv, file.c_str(), 1);
    wideattn_context* ctx = nullptr;
    const wideattn_status status = wideattn_open(&ctx, nullptr);
    if (old)
        setenv(kTuningPathEnv, saved.c_str(), 1);
    else
        unsetenv(kTuningPathEnv);
    REQUIRE_MESSAGE(status == WIDEATTN_OK, wideattn_last_error());
    return ctx;
}

std::string selected(wideattn_context* ctx, const wideattn_prefill_params& p) {
    int32_t index = -1;
    if (wideattn_is_supported(ctx, &p, gpu().device->cc_major(), gpu().device->cc_minor(), &index) != WIDEATTN_OK)
        return "";
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(ctx, index, &info) == WIDEATTN_OK);
    return info.name;
}

std::string status_text(wideattn_context* ctx, int32_t* state) {
    char text[kStatusBytes];
    REQUIRE(wideattn_tuning_status(ctx, state, text, sizeof text, nullptr) == WIDEATTN_OK);
    return text;
}

// o's raw bytes after launching the problem on `ctx`.
std::vector<unsigned char> output_bits(DeviceProblem& d, wideattn_context* ctx) {
    const std::string err = d.run(*gpu().device, ctx);
    REQUIRE_MESSAGE(err.empty(), err);
    std::vector<unsigned char> bytes;
    REQUIRE(d.download_raw(&bytes).empty());
    return bytes;
}

// A tuning file for this device and bundle choosing `kernel` for prefill_short bf16/bf16.
std::string tuning_text(const std::string& device_name, const std::string& kernel) {
    TuningFile f;
    f.device_name = device_name;
    f.cc_major = gpu().device->cc_major();
    f.cc_minor = gpu().device->cc_minor();
    f.driver_version = gpu().device->driver().version;
    f.bundle_checksum = wideattn_bundle_checksum(gpu().ctx);
    TuningChoice c;
    c.shape_class = ShapeClass::kPrefillShort;
    c.kernel = kernel;
    c.timings.push_back({kernel, 1.0, {}});
    f.choices.push_back(c);
    return tuning_json(f);
}

}  // namespace

TEST_CASE("gpu tuning: a file naming the non-default kernel of a class is followed by is_supported and prefill") {
    HostProblem host;
    REQUIRE(make_problem(problem_spec({100, 37}, {777, 0}, 32, 4, 16, kTuningSeed), &host).empty());
    DeviceProblem d;
    REQUIRE(d.create(*gpu().device, host, WIDEATTN_DTYPE_BF16).empty());
    REQUIRE(shape_class_of(d.params.total_q, d.params.num_seqs) == ShapeClass::kPrefillShort);

    wideattn_context* plain = gpu().ctx;  // the suite's context: WIDEATTN_TUNING=off
    const std::string automatic = selected(plain, d.params);
    REQUIRE(!automatic.empty());
    std::string other;
    for (const char* name : {"mma_bf16_d512_pp", "mma_bf16_d512", "wgmma_bf16_d512"}) {
        if (name == automatic || wideattn_set_prefill_kernel(plain, name) != WIDEATTN_OK) continue;
        if (selected(plain, d.params) == name) other = name;
        if (!other.empty()) break;
    }
    wideattn_set_prefill_kernel(plain, nullptr);
    REQUIRE_MESSAGE(!other.empty(), "no second bf16 kernel runs on this GPU");
    CAPTURE(automatic);
    CAPTURE(other);
    REQUIRE(wideattn_set_prefill_kernel(plain, other.c_str()) == WIDEATTN_OK);
    const std::vector<unsigned char> pinned_other = output_bits(d, plain);
    REQUIRE(wideattn_set_prefill_kernel(plain, automatic.c_str()) == WIDEATTN_OK);
    const std::vector<unsigned char> pinned_automatic = output_bits(d, plain);
    wideattn_set_prefill_kernel(plain, nullptr);

    TempDir tmp;
    const std::string file = tmp.path() + "/tuning.json";
    int32_t state = -1;
    SUBCASE("this device: followed") {
        write_file(file, tuning_text(gpu().device->name(), other));
        wideattn_context* tuned = open_with_tuning(file);
        CHECK(selected(tuned, d.params) == other);
        CHECK(output_bits(d, tuned) == pinned_other);
        if (pinned_other == pinned_automatic) MESSAGE("both kernels give the same bits here: the launch check is weak");
        const std::string why = status_text(tuned, &state);
        CHECK(state == WIDEATTN_TUNING_ACTIVE);
        CHECK_MESSAGE(why.find("followed on " + gpu().device->name()) != std::string::npos, why);
        CHECK_MESSAGE(why.find("name not known") == std::string::npos, why);  // the launch compared the name
        wideattn_close(tuned);
    }
    SUBCASE("another device name: ignored at launch") {
        write_file(file, tuning_text("Some Other GPU", other));
        wideattn_context* tuned = open_with_tuning(file);
        CHECK(output_bits(d, tuned) == pinned_automatic);
        const std::string why = status_text(tuned, &state);
        CHECK(state == WIDEATTN_TUNING_IGNORED);
        CHECK_MESSAGE(why.find("the last selection was for " + gpu().device->name()) != std::string::npos, why);
        wideattn_close(tuned);
    }
}

}  // namespace wideattn::test
