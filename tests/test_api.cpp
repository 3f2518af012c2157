// test_api.cpp - the C API without a GPU: opening bundles (good, missing, damaged manifest),
// lazy cubin verification, the exception boundary, kernel info, is_supported, the no-driver path
// of wideattn_prefill, and wideattn_k_from_v_cos_sin's checks and entries.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/bundle_files.h"
#include "dispatch/c_boundary.h"
#include "dispatch/manifest.h"
#include "dispatch/manifest_format.h"
#include "kernels/common/k_from_v.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

// Copies the built bundle into a temp dir so a test can damage it.
std::string copy_bundle(const test::TempDir& dir) {
    const std::string target = dir.path() + "/bundle";
    const std::string command = "cp -r '" + test::built_bundle() + "' '" + target + "'";
    REQUIRE(std::system(command.c_str()) == 0);
    return target;
}

// A libcuda path that does not exist: WIDEATTN_LIBCUDA set to it forces the no-driver path.
constexpr const char* kMissingLibcuda = "/nonexistent/libcuda.so.1";

// Forces the no-driver path even on a machine that has a driver (it takes effect at the
// process's first driver use).
void force_no_driver() { setenv("WIDEATTN_LIBCUDA", kMissingLibcuda, 1); }

// The built bundle, opened (REQUIREd) for the lifetime of the object.
class OpenBundle {
public:
    OpenBundle() { REQUIRE(wideattn_open(&ctx_, test::built_bundle().c_str()) == WIDEATTN_OK); }
    ~OpenBundle() { wideattn_close(ctx_); }
    OpenBundle(const OpenBundle&) = delete;
    OpenBundle& operator=(const OpenBundle&) = delete;
    wideattn_context* ctx() const { return ctx_; }

private:
    wideattn_context* ctx_ = nullptr;
};

}  // namespace

TEST_CASE("api: version and status names") {
    CHECK(std::strcmp(wideattn_version(), "0.9.0") == 0);
    CHECK(std::strcmp(wideattn_status_string(WIDEATTN_ERROR_NO_DRIVER), "WIDEATTN_ERROR_NO_DRIVER") == 0);
    CHECK(std::strcmp(wideattn_status_string(static_cast<wideattn_status>(99)), "WIDEATTN_STATUS_UNKNOWN") == 0);
}

TEST_CASE("api: opens the built bundle and describes its kernels") {
    wideattn_context* ctx = nullptr;
    REQUIRE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK);
    CHECK(std::strcmp(wideattn_bundle_dir(ctx), test::built_bundle().c_str()) == 0);
    const int count = wideattn_kernel_count(ctx);
    REQUIRE(count >= 2);
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(ctx, 0, &info) == WIDEATTN_OK);
    CHECK(info.threads > 0);
    CHECK(info.registers > 0);
    CHECK(info.spill_bytes == 0);
    CHECK(wideattn_get_kernel_info(ctx, count, &info) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "index=" + std::to_string(count) + " outside 0.." + std::to_string(count - 1));
    CHECK(wideattn_get_kernel_info(ctx, 0, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "info is NULL");
    wideattn_close(ctx);
    wideattn_close(nullptr);
}

TEST_CASE("api: bundle directory from the argument, then WIDEATTN_BUNDLE") {
    wideattn_context* ctx = nullptr;
    const std::string saved = test::built_bundle();
    setenv("WIDEATTN_BUNDLE", "/nonexistent/env-bundle", 1);
    CHECK(wideattn_open(&ctx, nullptr) == WIDEATTN_ERROR_BUNDLE);
    CHECK(std::string(wideattn_last_error()).find("/nonexistent/env-bundle/manifest.json") != std::string::npos);
    CHECK(ctx == nullptr);
    CHECK(wideattn_open(&ctx, "") == WIDEATTN_ERROR_BUNDLE);  // "" is NULL: the variable
    CHECK(std::string(wideattn_last_error()).find("/nonexistent/env-bundle/manifest.json") != std::string::npos);
    CHECK(wideattn_open(&ctx, saved.c_str()) == WIDEATTN_OK);  // the argument wins
    wideattn_close(ctx);
    setenv("WIDEATTN_BUNDLE", saved.c_str(), 1);
    CHECK(wideattn_open(&ctx, nullptr) == WIDEATTN_OK);
    wideattn_close(ctx);
    CHECK(wideattn_open(nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "ctx (the output pointer) is NULL");
}

TEST_CASE("api: a damaged manifest fails at open with the file named") {
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    wideattn_context* ctx = nullptr;

    SUBCASE("corrupt manifest") {
        test::write_file(bundle + "/manifest.json", "{\"format\": 1, \"kernels\": [");
        CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
        CHECK(std::string(wideattn_last_error()).find("manifest.json is not valid JSON") != std::string::npos);
    }
    SUBCASE("missing manifest") {
        std::remove((bundle + "/manifest.json").c_str());
        CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
        CHECK(std::string(wideattn_last_error()).find("cannot open " + bundle + "/manifest.json") != std::string::npos);
    }
    SUBCASE("a directory in place of manifest.json: a status, not an exception through the C ABI") {
        std::remove((bundle + "/manifest.json").c_str());
        REQUIRE(mkdir((bundle + "/manifest.json").c_str(), 0700) == 0);
        CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
        CHECK(std::string(wideattn_last_error()).find(bundle + "/manifest.json is a directory, not a regular file") ==
              0);
    }
    CHECK(ctx == nullptr);
}

TEST_CASE("api: open reads the manifest only; each cubin is verified at its first load") {
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    Manifest m;
    std::string err;
    REQUIRE(load_manifest(bundle, &m, &err));
    const ManifestKernel& k = m.kernels[0];
    const std::string cubin = bundle + "/" + k.cubin;
    const std::string image = test::read_file(cubin);
    std::string loaded, message;

    SUBCASE("damaged cubins leave open and the kernel info working") {
        // Every cubin gone: open never touches them, so it stays cheap for any bundle size.
        for (const ManifestKernel& each : m.kernels) std::remove((bundle + "/" + each.cubin).c_str());
        wideattn_context* ctx = nullptr;
        REQUIRE(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_OK);
        CHECK(wideattn_kernel_count(ctx) == static_cast<int32_t>(m.kernels.size()));
        wideattn_kernel_info info{};
        CHECK(wideattn_get_kernel_info(ctx, 0, &info) == WIDEATTN_OK);
        CHECK(std::string(info.cubin) == k.cubin);
        wideattn_close(ctx);
    }
    SUBCASE("an intact cubin loads") {
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_OK);
        CHECK(loaded == image);
    }
    SUBCASE("missing cubin") {
        std::remove(cubin.c_str());
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_ERROR_BUNDLE);
        CHECK(message == "cannot read cubin " + cubin + " of kernel " + k.name + " (" + k.arch + "): cannot open " +
                             cubin + " (No such file or directory)");
    }
    SUBCASE("truncated cubin") {
        test::write_file(cubin, image.substr(0, image.size() / 2));
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_ERROR_BUNDLE);
        CHECK(message == "cubin " + cubin + " has " + std::to_string(image.size() / 2) + " bytes, manifest says " +
                             std::to_string(image.size()) + " (truncated or replaced file)");
    }
    SUBCASE("a longer file in its place") {
        test::write_file(cubin, image + "x");
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_ERROR_BUNDLE);
        CHECK(message.find("has " + std::to_string(image.size() + 1) + " bytes, manifest says") != std::string::npos);
    }
    SUBCASE("corrupt cubin of the right size") {
        std::string corrupt = image;
        corrupt[corrupt.size() / 2] ^= 0x5a;
        test::write_file(cubin, corrupt);
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_ERROR_BUNDLE);
        CHECK(message == "cubin " + cubin + " checksum " + checksum_text(fnv1a64(corrupt.data(), corrupt.size())) +
                             " does not match the manifest's " + k.cubin_fnv1a64 + " (corrupt file)");
    }
    SUBCASE("a directory in place of a cubin") {
        std::remove(cubin.c_str());
        REQUIRE(mkdir(cubin.c_str(), 0700) == 0);
        CHECK(read_verified_cubin(bundle, k, &loaded, &message) == WIDEATTN_ERROR_BUNDLE);
        CHECK(message.find(cubin + " is a directory, not a regular file") != std::string::npos);
    }
}

TEST_CASE("api: an exception never crosses the C ABI") {
    // guarded() is what every exported function that can throw runs its body through.
    CHECK(guarded("wideattn_open", []() -> wideattn_status { throw std::runtime_error("boom"); }) ==
          WIDEATTN_ERROR_INTERNAL);
    CHECK(std::string(wideattn_last_error()) == "wideattn_open: unexpected exception: boom");
    CHECK(guarded("wideattn_prefill", []() -> wideattn_status { throw std::bad_alloc(); }) == WIDEATTN_ERROR_INTERNAL);
    CHECK(std::string(wideattn_last_error()) == "wideattn_prefill: out of host memory");
    CHECK(guarded("wideattn_close", []() -> wideattn_status { throw 42; }) == WIDEATTN_ERROR_INTERNAL);
    CHECK(std::string(wideattn_last_error()) == "wideattn_close: unexpected exception of an unknown type");
    // A message of any length is cut to the fixed buffer, not overrun.
    const std::string long_what(10000, 'w');
    CHECK(guarded("f", [&]() -> wideattn_status { throw std::runtime_error(long_what); }) == WIDEATTN_ERROR_INTERNAL);
    CHECK(std::string(wideattn_last_error()).size() < 1024);
    // The next failure replaces the fixed message; success leaves the last one.
    CHECK(guarded("f", [] { return fail(WIDEATTN_ERROR_BUNDLE, "plain"); }) == WIDEATTN_ERROR_BUNDLE);
    CHECK(std::string(wideattn_last_error()) == "plain");
    CHECK(guarded("f", [] { return WIDEATTN_OK; }) == WIDEATTN_OK);
    CHECK(std::string(wideattn_last_error()) == "plain");
    CHECK(std::string(wideattn_status_string(WIDEATTN_ERROR_INTERNAL)) == "WIDEATTN_ERROR_INTERNAL");
}

TEST_CASE("api: is_supported runs validation and selection without a driver") {
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    wideattn_prefill_params p = test::valid_params();
    p.o_dtype = WIDEATTN_DTYPE_F64;
    int32_t index = -1;
    REQUIRE(wideattn_is_supported(ctx, &p, 9, 0, &index) == WIDEATTN_OK);
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(ctx, index, &info) == WIDEATTN_OK);
    CHECK(std::string(info.name) == "reference_f64");
    CHECK(std::string(info.arch).rfind("sm_90", 0) == 0);
    CHECK(wideattn_is_supported(ctx, &p, 7, 0, &index) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(std::string(wideattn_last_error()).find("on sm_70") != std::string::npos);
    p.block_size = 8;
    CHECK(wideattn_is_supported(ctx, &p, 9, 0, &index) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "block_size=8 is not a positive multiple of 16");
    CHECK(wideattn_is_supported(nullptr, &p, 9, 0, &index) == WIDEATTN_ERROR_INVALID_ARGUMENT);
}

namespace {

std::string selected_name(wideattn_context* ctx, const wideattn_prefill_params& p, int major, int minor) {
    int32_t index = -1;
    if (wideattn_is_supported(ctx, &p, major, minor, &index) != WIDEATTN_OK) return "";
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(ctx, index, &info) == WIDEATTN_OK);
    return std::string(info.name) + "@" + info.arch;
}

// Whether the bundle has a kernel whose info satisfies `match` (every info read REQUIREd).
template <typename Match>
bool bundle_has_kernel(wideattn_context* ctx, Match match) {
    for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info info{};
        REQUIRE(wideattn_get_kernel_info(ctx, i, &info) == WIDEATTN_OK);
        if (match(info)) return true;
    }
    return false;
}

bool bundle_has(wideattn_context* ctx, const std::string& name) {
    return bundle_has_kernel(ctx, [&](const wideattn_kernel_info& info) { return name == info.name; });
}

bool bundle_has_kind(wideattn_context* ctx, const std::string& kind) {
    return bundle_has_kernel(ctx, [&](const wideattn_kernel_info& info) { return kind == info.kind; });
}

}  // namespace

TEST_CASE("api: set_prefill_kernel restricts selection to one kernel by name") {
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    const wideattn_prefill_params p = test::valid_params();
    const std::string automatic = selected_name(ctx, p, 9, 0);
    if (bundle_has(ctx, "wgmma_bf16_d512")) CHECK(automatic == "wgmma_bf16_d512@sm_90a");
    if (bundle_has(ctx, "mma_bf16_d512")) {
        REQUIRE(wideattn_set_prefill_kernel(ctx, "mma_bf16_d512") == WIDEATTN_OK);
        CHECK(selected_name(ctx, p, 9, 0).rfind("mma_bf16_d512@sm_90", 0) == 0);
        // sm_120 runs only a cubin built for sm_12x (absent from e.g. a -Dgpu_archs=sm_90a build).
        const bool has_sm12x = bundle_has_kernel(ctx, [](const wideattn_kernel_info& info) {
            return std::string(info.name) == "mma_bf16_d512" && std::string(info.arch).rfind("sm_12", 0) == 0;
        });
        if (has_sm12x) CHECK(selected_name(ctx, p, 12, 0).rfind("mma_bf16_d512@", 0) == 0);
    }
    // Calls with other dtypes select as usual: the fp64 reference next to a restricted bf16 kernel.
    wideattn_prefill_params reference = p;
    reference.o_dtype = WIDEATTN_DTYPE_F64;
    CHECK(selected_name(ctx, reference, 9, 0).rfind("reference_f64@", 0) == 0);
    REQUIRE(wideattn_set_prefill_kernel(ctx, "reference_f64") == WIDEATTN_OK);
    CHECK(selected_name(ctx, p, 9, 0) == automatic);
    int32_t index = -1;
    // A restricted kernel that cannot serve the call: the refusal says why and names the restriction.
    if (bundle_has(ctx, "wgmma_bf16_d512")) {
        REQUIRE(wideattn_set_prefill_kernel(ctx, "wgmma_bf16_d512") == WIDEATTN_OK);
        CHECK(wideattn_is_supported(ctx, &p, 12, 0, &index) == WIDEATTN_ERROR_UNSUPPORTED);
        CHECK(std::string(wideattn_last_error()).find("restricted to kernel wgmma_bf16_d512") != std::string::npos);
        CHECK(std::string(wideattn_last_error()).find("does not run on sm_120") != std::string::npos);
    }
    // Unknown and non-prefill names are refused and leave the setting as it was.
    CHECK(wideattn_set_prefill_kernel(ctx, "no_such_kernel") == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()).find("name=no_such_kernel is not a prefill kernel") != std::string::npos);
    CHECK(std::string(wideattn_last_error()).find("reference_f64") != std::string::npos);
    if (bundle_has(ctx, "amax_e4m3")) CHECK(wideattn_set_prefill_kernel(ctx, "amax_e4m3") == WIDEATTN_ERROR_INVALID_ARGUMENT);
    if (bundle_has(ctx, "wgmma_bf16_d512")) CHECK(wideattn_is_supported(ctx, &p, 12, 0, &index) == WIDEATTN_ERROR_UNSUPPORTED);
    // NULL and "" restore automatic selection.
    REQUIRE(wideattn_set_prefill_kernel(ctx, nullptr) == WIDEATTN_OK);
    CHECK(selected_name(ctx, p, 9, 0) == automatic);
    REQUIRE(wideattn_set_prefill_kernel(ctx, "reference_f64") == WIDEATTN_OK);
    REQUIRE(wideattn_set_prefill_kernel(ctx, "") == WIDEATTN_OK);
    CHECK(selected_name(ctx, p, 9, 0) == automatic);
    CHECK(wideattn_set_prefill_kernel(nullptr, "mma_bf16_d512") == WIDEATTN_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("api: without a driver, launching returns NO_DRIVER and the process keeps working") {
    force_no_driver();
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    wideattn_prefill_params p = test::valid_params();
    p.o_dtype = WIDEATTN_DTYPE_F64;
    CHECK(wideattn_prefill(ctx, &p, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
    CHECK(std::string(wideattn_last_error()).find(std::string("cannot load ") + kMissingLibcuda) != std::string::npos);
    // Validation still comes first.
    p.q = nullptr;
    CHECK(wideattn_prefill(ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "q is NULL");
    CHECK(wideattn_prefill(nullptr, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("api: quantise-into-cache validates first, then needs the driver") {
    force_no_driver();
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    wideattn_quantize_params p = test::valid_quantize_params();
    CHECK(wideattn_quantize_to_cache(ctx, &p, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
    p.head_dim = 12;
    CHECK(wideattn_quantize_to_cache(ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "head_dim=12 is not a positive multiple of 8");
    CHECK(wideattn_quantize_to_cache(ctx, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(wideattn_quantize_to_cache(nullptr, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(bundle_has_kind(ctx, "quantize_e4m3"));
}

// heads x head_dim = 16384 x 4096 in the rows of a valid call: 65536 blocks in grid.y of the bundled
// quantise and amax kernels (1024 elements per block), one more than CUDA allows.
constexpr int32_t kWideHeads = 16384;
constexpr int32_t kWideHeadDim = 4096;

TEST_CASE("api: a grid.y that overflows is an invalid argument without a driver too") {
    force_no_driver();
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    const std::string expected = "heads=16384 x head_dim=4096 needs 65536 blocks in grid.y of ";
    wideattn_quantize_params q = test::valid_quantize_params();
    q.heads = kWideHeads;
    q.head_dim = kWideHeadDim;
    q.src_head_stride = q.cache_head_stride = kWideHeadDim;
    q.src_token_stride = q.cache_slot_stride = int64_t{kWideHeads} * kWideHeadDim;
    q.cache_block_stride = q.cache_slot_stride * q.block_size;
    q.cache = test::far_window(1);  // past src's 2^31 bytes
    // Up to e2619f8 the grid was checked only after the driver loaded: NO_DRIVER here.
    CHECK(wideattn_quantize_to_cache(ctx, &q, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) ==
          expected + "quantize_e4m3 (1024 elements per block, limit 65535): at most 16383 heads of head_dim=4096");
    q.heads = kWideHeads - 1;  // 65535 blocks: valid, so the call needs the driver
    CHECK(wideattn_quantize_to_cache(ctx, &q, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
    wideattn_scale_params s = test::valid_scale_params();
    s.heads = kWideHeads;
    s.head_dim = kWideHeadDim;
    s.src_head_stride = kWideHeadDim;
    s.src_token_stride = int64_t{kWideHeads} * kWideHeadDim;
    s.scale = static_cast<float*>(test::far_window(1));
    s.nonfinite_count = reinterpret_cast<int32_t*>(s.scale + 1);
    CHECK(wideattn_compute_scale(ctx, &s, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) ==
          expected + "amax_e4m3 (1024 elements per block, limit 65535): at most 16383 heads of head_dim=4096");
    s.heads = kWideHeads - 1;
    CHECK(wideattn_compute_scale(ctx, &s, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
}

TEST_CASE("api: compute_scale validates first, then needs the driver") {
    force_no_driver();
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    // wideattn_compute_scale and wideattn_compute_scale_pow2 (the same parameters) alike.
    for (const auto compute : {wideattn_compute_scale, wideattn_compute_scale_pow2}) {
        wideattn_scale_params p = test::valid_scale_params();
        CHECK(compute(ctx, &p, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
        CHECK(std::string(wideattn_last_error()).find(std::string("cannot load ") + kMissingLibcuda) !=
              std::string::npos);
        p.tokens = 0;  // an empty tensor still writes the scale, so it still needs the driver
        CHECK(compute(ctx, &p, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
        p.scale = nullptr;
        CHECK(compute(ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(std::string(wideattn_last_error()) == "scale is NULL");
        p = test::valid_scale_params();
        p.src_dtype = WIDEATTN_DTYPE_F16;
        CHECK(compute(ctx, &p, nullptr) == WIDEATTN_ERROR_UNSUPPORTED);
        CHECK(std::string(wideattn_last_error()) == "src_dtype=1 is not supported (bf16 = 0)");
        CHECK(compute(ctx, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(std::string(wideattn_last_error()) == "params is NULL");
        CHECK(compute(nullptr, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(std::string(wideattn_last_error()) == "ctx is NULL");
    }
    // The flat destination (Q) goes through the quantise entry point with slot_mapping NULL.
    wideattn_quantize_params q = test::valid_quantize_params();
    q.slot_mapping = nullptr;
    CHECK(wideattn_quantize_to_cache(ctx, &q, nullptr) == WIDEATTN_ERROR_NO_DRIVER);
    q.tokens = 1000;
    CHECK(wideattn_quantize_to_cache(ctx, &q, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()).find("tokens=1000 exceed") != std::string::npos);
    CHECK(bundle_has_kind(ctx, "amax_e4m3"));
}

namespace {

constexpr int kH200Sms = 132;

// A decode-shaped call: `seqs` sequences of q_len new tokens each, hints set.
wideattn_prefill_params decode_params(int32_t seqs, int32_t q_len, int32_t max_keys) {
    wideattn_prefill_params p = test::valid_params();
    p.num_seqs = seqs;
    p.total_q = seqs * q_len;
    p.max_seqlen_q = q_len;
    p.max_seqlen_k = max_keys;
    return p;
}

wideattn_launch_plan plan_on_h200(wideattn_context* ctx, const wideattn_prefill_params& p) {
    wideattn_launch_plan plan{};
    REQUIRE_MESSAGE(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_OK, wideattn_last_error());
    return plan;
}

std::string kernel_name(wideattn_context* ctx, int32_t index) {
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(ctx, index, &info) == WIDEATTN_OK);
    return info.name;
}

}  // namespace

TEST_CASE("api: plan_launch splits keys only where the blocks leave the machine idle") {
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    // 1 x 32k: 4 blocks; 32 splits reach 128 of 132 SMs (97%, the smallest count within 95% of
    // the best); without a workspace the call runs unsplit and says what it would need.
    wideattn_prefill_params p = decode_params(1, 1, 32768);
    wideattn_launch_plan plan = plan_on_h200(ctx, p);
    CHECK(plan.preferred_splits == 32);
    CHECK(plan.num_splits == 1);
    CHECK(plan.merge_kernel_index == -1);
    // 32 x 1 x 32 rows of 512 fp32, then 32 x 32 fp32 LSE rounded up to 256 bytes.
    const int64_t bytes_32 = 32 * 32 * 512 * 4 + 4096;
    CHECK(plan.workspace_bytes == bytes_32);
    p.workspace = reinterpret_cast<void*>(uintptr_t{0x70000000});
    p.workspace_bytes = bytes_32;
    plan = plan_on_h200(ctx, p);
    CHECK(plan.num_splits == 32);
    CHECK(kernel_name(ctx, plan.merge_kernel_index) == "merge_splits_bf16_rows");  // the sm_90a merge
    // One byte less: the most splits that fit (31 x 64 KiB + 31 x 128 B -> 4 KiB).
    p.workspace_bytes = bytes_32 - 1;
    CHECK(plan_on_h200(ctx, p).num_splits == 31);
    // 8 x 32k: 32 blocks, 4 splits fill 128 SMs; 64 x 8k fills the machine: no split.
    CHECK(plan_on_h200(ctx, decode_params(8, 1, 32768)).preferred_splits == 4);
    CHECK(plan_on_h200(ctx, decode_params(64, 1, 8192)).preferred_splits == 1);
    // q_len 5 at 32 x 20k: 128 blocks, already 97%: no split; at 1 x 20k: 32 splits of 640 keys.
    CHECK(plan_on_h200(ctx, decode_params(32, 5, 20480)).preferred_splits == 1);
    CHECK(plan_on_h200(ctx, decode_params(1, 5, 20480)).preferred_splits == 32);
    // A short context caps the count at one split per WIDEATTN_MIN_SPLIT_KEYS keys.
    CHECK(plan_on_h200(ctx, decode_params(1, 1, 1000)).preferred_splits == 3);
    CHECK(plan_on_h200(ctx, decode_params(1, 1, 100)).preferred_splits == 1);
    // Unknown hints: the block count comes from total_q and num_seqs, no key cap.
    wideattn_prefill_params no_hints = decode_params(1, 1, 0);
    no_hints.max_seqlen_q = 0;
    CHECK(plan_on_h200(ctx, no_hints).preferred_splits == 32);
    // A long prefill never splits.
    wideattn_prefill_params prompt = test::valid_params();
    prompt.num_seqs = 1;
    prompt.total_q = 16384;
    CHECK(plan_on_h200(ctx, test::tensors_apart(prompt)).preferred_splits == 1);
}

TEST_CASE("api: plan_launch reports a forced split count as it is, and what it needs") {
    const OpenBundle bundle;
    wideattn_context* const ctx = bundle.ctx();
    wideattn_prefill_params p = decode_params(2, 3, 5000);
    p.num_splits = 7;
    // Without a workspace the plan still answers what the call needs (the launch would refuse it).
    wideattn_launch_plan plan = plan_on_h200(ctx, p);
    CHECK(plan.num_splits == 7);
    CHECK(plan.workspace_bytes == 2757888);
    p.workspace = reinterpret_cast<void*>(uintptr_t{0x70000000});
    p.workspace_bytes = 2757888;  // 7 splits x 6 tokens x 32 heads: 1,344 rows of 2 KiB, then 1,344 x 4 B
    plan = plan_on_h200(ctx, p);
    CHECK(plan.num_splits == 7);
    CHECK(plan.preferred_splits == 7);
    // The fp64 reference has no split entry.
    p.o_dtype = WIDEATTN_DTYPE_F64;
    CHECK(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()).find("kernel reference_f64 does not split keys") != std::string::npos);
    p.num_splits = 0;
    CHECK(plan_on_h200(ctx, p).num_splits == 1);
    CHECK(wideattn_plan_launch(ctx, &p, 9, 0, 0, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "num_sms=0 must be >= 1");
    CHECK(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "plan is NULL");
}

TEST_CASE("api: without a merge kernel a call runs unsplit, and a forced count is refused by name") {
    test::TempDir tmp;
    test::write_file(tmp.path() + "/manifest.json",
                     test::manifest_json({test::split_kernel_json("wgmma_bf16_d512", "sm_90a")}));
    wideattn_context* ctx = nullptr;
    REQUIRE_MESSAGE(wideattn_open(&ctx, tmp.path().c_str()) == WIDEATTN_OK, wideattn_last_error());
    wideattn_prefill_params p = decode_params(1, 1, 32768);
    wideattn_launch_plan plan{};
    REQUIRE_MESSAGE(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_OK, wideattn_last_error());
    CHECK(plan.num_splits == 1);
    CHECK(plan.preferred_splits == 1);
    CHECK(plan.workspace_bytes == 0);
    p.num_splits = 2;
    CHECK(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(std::string(wideattn_last_error()) ==
          "num_splits=2: no split-KV merge kernel in the bundle for o_dtype=bf16 on sm_90");
    wideattn_close(ctx);
}

TEST_CASE("api: workspace_size needs a device and says so without a driver") {
    const OpenBundle bundle;
    wideattn_prefill_params p = decode_params(1, 1, 32768);
    int64_t bytes = -1;
    const wideattn_status status = wideattn_workspace_size(bundle.ctx(), &p, &bytes);
    CHECK((status == WIDEATTN_ERROR_NO_DRIVER || status == WIDEATTN_ERROR_NO_DEVICE));
    CHECK(wideattn_workspace_size(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "bytes is NULL");
    p.num_splits = -1;
    CHECK(wideattn_workspace_size(bundle.ctx(), &p, &bytes) == WIDEATTN_ERROR_INVALID_ARGUMENT);
}

namespace {

// Gemma 4's global layers: the description the cos / sin table tests fill tables for.
constexpr float kTableTheta = 1.0e6f;
constexpr int32_t kTableHeadDim = 512;
constexpr int32_t kTableRotaryDims = 128;
constexpr int32_t kTableFrequencies = kTableRotaryDims / 2;
constexpr unsigned char kUntouched = 0xab;  // what a refused call must leave in the buffer

// The table's entry [position][i] as wideattn_k_from_v_cos_sin defines it, from this test's own
// reading of kernels/common/k_from_v.h: the bf16 bits of rope_cos_sin_reduced, cos low.
uint32_t expected_entry(int32_t position, float inv_freq) {
    const RopeCosSin cs = rope_cos_sin_reduced(rope_angle(position, inv_freq));
    uint32_t c = 0, s = 0;
    std::memcpy(&c, &cs.c, sizeof c);
    std::memcpy(&s, &cs.s, sizeof s);
    CHECK((c & 0xffffu) == 0);  // already bf16 values
    CHECK((s & 0xffffu) == 0);
    return (c >> 16) | (s & 0xffff0000u);
}

// Calls wideattn_k_from_v_cos_sin into a buffer of `bytes` (kUntouched) and checks that it refuses
// with `message`, leaving the buffer as it was.
void check_table_refused(float theta, const float* inv_freq, int32_t head_dim, int32_t rotary_dims, int32_t positions,
                         size_t bytes, bool null_out, const std::string& message) {
    CAPTURE(message);
    std::vector<unsigned char> out(bytes, kUntouched);
    CHECK(wideattn_k_from_v_cos_sin(theta, inv_freq, head_dim, rotary_dims, positions, null_out ? nullptr : out.data(),
                                    bytes) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == message);
    CHECK(std::all_of(out.begin(), out.end(), [](unsigned char b) { return b == kUntouched; }));
}

}  // namespace

TEST_CASE("api: k_from_v_cos_sin refuses each bad argument by name and value, writing nothing") {
    constexpr int32_t kPositions = 10;
    constexpr size_t kBytes = size_t{kPositions} * kTableFrequencies * 4;
    const std::vector<float> inv_freq(kTableFrequencies, 0.5f);
    struct Bad {
        float theta;
        const float* inv_freq;
        int32_t head_dim, rotary_dims, positions;
        size_t bytes;
        bool null_out;
        std::string message;
    };
    const std::string rotary = " (the table's rows hold whole 8-byte pairs of frequencies)";
    const Bad cases[] = {
        {kTableTheta, nullptr, 0, kTableRotaryDims, kPositions, kBytes, false, "head_dim=0 must be even and > 0"},
        {kTableTheta, nullptr, -2, kTableRotaryDims, kPositions, kBytes, false, "head_dim=-2 must be even and > 0"},
        {kTableTheta, nullptr, 511, kTableRotaryDims, kPositions, kBytes, false, "head_dim=511 must be even and > 0"},
        {kTableTheta, nullptr, kTableHeadDim, 0, kPositions, kBytes, false,
         "rotary_dims=0 must be a multiple of 4 in 4..head_dim=512" + rotary},
        {kTableTheta, nullptr, kTableHeadDim, 2, kPositions, kBytes, false,
         "rotary_dims=2 must be a multiple of 4 in 4..head_dim=512" + rotary},
        {kTableTheta, nullptr, kTableHeadDim, 126, kPositions, kBytes, false,
         "rotary_dims=126 must be a multiple of 4 in 4..head_dim=512" + rotary},
        {kTableTheta, nullptr, kTableHeadDim, -4, kPositions, kBytes, false,
         "rotary_dims=-4 must be a multiple of 4 in 4..head_dim=512" + rotary},
        {kTableTheta, nullptr, kTableHeadDim, 516, kPositions, kBytes, false,
         "rotary_dims=516 must be a multiple of 4 in 4..head_dim=512" + rotary},
        {kTableTheta, nullptr, 8, 12, kPositions, kBytes, false,
         "rotary_dims=12 must be a multiple of 4 in 4..head_dim=8" + rotary},
        {kTableTheta, nullptr, kTableHeadDim, kTableRotaryDims, 0, kBytes, false, "positions=0 must be >= 1"},
        {kTableTheta, nullptr, kTableHeadDim, kTableRotaryDims, INT32_MIN, kBytes, false,
         "positions=-2147483648 must be >= 1"},
        {0.0f, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes, false,
         "rope_theta=0 must be finite and > 0 (or pass the model's inv_freq)"},
        {-1.0f, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes, false,
         "rope_theta=-1 must be finite and > 0 (or pass the model's inv_freq)"},
        {NAN, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes, false,
         "rope_theta=nan must be finite and > 0 (or pass the model's inv_freq)"},
        {INFINITY, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes, false,
         "rope_theta=inf must be finite and > 0 (or pass the model's inv_freq)"},
        {kTableTheta, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes, true,
         "out is NULL (a host buffer of positions * rotary_dims / 2 * 4 bytes)"},
        {kTableTheta, nullptr, kTableHeadDim, kTableRotaryDims, kPositions, kBytes - 1, false,
         "out_bytes=2559 is below the table's 2560 bytes (positions=10 x rotary_dims / 2=64 x 4)"},
        {kTableTheta, inv_freq.data(), kTableHeadDim, kTableHeadDim, INT32_MAX, kBytes, false,
         "out_bytes=2560 is below the table's 2199023254528 bytes (positions=2147483647 x rotary_dims / 2=256 x 4)"},
    };
    for (const Bad& c : cases)
        check_table_refused(c.theta, c.inv_freq, c.head_dim, c.rotary_dims, c.positions, c.bytes, c.null_out,
                            c.message);
}

TEST_CASE("api: k_from_v_cos_sin's entries are rope_cos_sin_reduced's bf16 bits, cos low, row by row") {
    // Positions 0 .. 299 and a window below 2^17 (angles up to 1.3e5 rad at the first frequency),
    // from theta and from a caller's frequencies (the formula's with one entry an fp32 ulp off, and
    // theta NaN: not read with inv_freq). Bytes past the table stay as they were.
    constexpr int32_t kPositions = 300;
    constexpr int32_t kLongPositions = 131072;
    const size_t bytes = size_t{kPositions} * kTableFrequencies * sizeof(uint32_t);
    std::vector<uint32_t> table(size_t{kPositions} * kTableFrequencies + 1, 0xabababab);
    REQUIRE_MESSAGE(wideattn_k_from_v_cos_sin(kTableTheta, nullptr, kTableHeadDim, kTableRotaryDims, kPositions,
                                              table.data(), bytes + sizeof(uint32_t)) == WIDEATTN_OK,
                    wideattn_last_error());
    CHECK(table.back() == 0xabababab);
    CHECK(table[0] == 0x00003f80u);  // position 0: cos 1, sin 0 for every frequency
    CHECK(table[kTableFrequencies - 1] == 0x00003f80u);
    for (int32_t j = 0; j < kPositions; ++j)
        for (int32_t i = 0; i < kTableFrequencies; ++i) {
            CAPTURE(j);
            CAPTURE(i);
            const uint32_t want = expected_entry(j, rope_inv_freq(kTableTheta, i, kTableHeadDim, kTableRotaryDims));
            const uint32_t got = table[size_t(j) * kTableFrequencies + i];
            if (got != want) REQUIRE(got == want);
        }

    std::vector<float> frequencies(kTableFrequencies);
    for (int32_t i = 0; i < kTableFrequencies; ++i)
        frequencies[i] = rope_inv_freq(kTableTheta, i, kTableHeadDim, kTableRotaryDims);
    frequencies[1] = std::nextafter(frequencies[1], 1.0f);
    std::vector<uint32_t> long_table(size_t{kLongPositions} * kTableFrequencies);
    REQUIRE_MESSAGE(wideattn_k_from_v_cos_sin(NAN, frequencies.data(), kTableHeadDim, kTableRotaryDims,
                                              kLongPositions, long_table.data(),
                                              long_table.size() * sizeof(uint32_t)) == WIDEATTN_OK,
                    wideattn_last_error());
    int64_t differ_from_formula = 0;
    for (int32_t j = kLongPositions - 64; j < kLongPositions; ++j)
        for (int32_t i = 0; i < kTableFrequencies; ++i) {
            CAPTURE(j);
            CAPTURE(i);
            const uint32_t got = long_table[size_t(j) * kTableFrequencies + i];
            if (got != expected_entry(j, frequencies[i])) REQUIRE(got == expected_entry(j, frequencies[i]));
            differ_from_formula +=
                got != expected_entry(j, rope_inv_freq(kTableTheta, i, kTableHeadDim, kTableRotaryDims));
        }
    CHECK(differ_from_formula > 0);  // the perturbed frequency's angles moved by ~0.007 rad

    // A row of the same frequencies is the same whatever the table's length.
    std::vector<uint32_t> short_table(size_t{2} * kTableFrequencies);
    REQUIRE(wideattn_k_from_v_cos_sin(NAN, frequencies.data(), kTableHeadDim, kTableRotaryDims, 2, short_table.data(),
                                      short_table.size() * sizeof(uint32_t)) == WIDEATTN_OK);
    CHECK(std::equal(short_table.begin(), short_table.end(), long_table.begin()));
}
