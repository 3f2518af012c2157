// test_fake_driver.cpp - the C API's launch path on a machine without a GPU, through the stand-in
// driver tests/fake_driver/fake_libcuda.cpp (WIDEATTN_LIBCUDA points at it; tests/meson.build):
// a cubin is read and checked at its kernel's first launch (a corrupt, truncated or missing one,
// or a directory in its place, fails that launch with WIDEATTN_ERROR_BUNDLE naming the file,
// while open and the other kernels keep working), and a K/V cache that tensor maps cannot
// describe runs the mma kernel instead of failing in the driver. A process of its own: the
// driver is loaded once per process.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dispatch/manifest.h"
#include "kernels/k_from_v_rebuild/traits.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

constexpr int64_t k2to62 = int64_t{1} << 62;
constexpr const char* kPreferredArch = "sm_90a";  // where the bundle has every tier
constexpr int kFakeSms = 132;                      // the fake driver's multiprocessor count (an H200's)

// The arch the fake device runs: sm_90a when the bundle has the fp64 kernel for it, else the
// first arch it has that kernel for. Sets $WIDEATTN_FAKE_CC to match (the fake reads it per call).
std::string fake_arch(const Manifest& m) {
    std::string arch;
    for (const ManifestKernel& k : m.kernels)
        if (k.name == "reference_f64" && (arch.empty() || k.arch == kPreferredArch)) arch = k.arch;
    REQUIRE_MESSAGE(!arch.empty(), "the bundle has no reference_f64 kernel");
    int32_t major = 0, minor = 0;
    bool specific = false;
    REQUIRE(parse_arch(arch, &major, &minor, &specific));
    setenv("WIDEATTN_FAKE_CC", std::to_string(major * 10 + minor).c_str(), 1);
    return arch;
}

// The fake driver's counters, read through the library libwideattn loaded.
class FakeDriver {
public:
    FakeDriver() {
        const char* path = std::getenv("WIDEATTN_LIBCUDA");
        REQUIRE(path);
        handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle_, dlerror());
        last_launch_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_cuda_last_launch"));
        module_loads_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_cuda_module_loads"));
        tensor_maps_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_cuda_tensor_maps"));
        take_launches_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_cuda_take_launches"));
        last_rebuild_ = reinterpret_cast<const void* (*)()>(dlsym(handle_, "fake_cuda_last_rebuild"));
        REQUIRE((last_launch_ && module_loads_ && tensor_maps_ && take_launches_ && last_rebuild_));
    }
    ~FakeDriver() { dlclose(handle_); }
    FakeDriver(const FakeDriver&) = delete;
    FakeDriver& operator=(const FakeDriver&) = delete;
    std::string last_launch() const { return last_launch_(); }
    int module_loads() const { return module_loads_(); }
    int tensor_maps() const { return tensor_maps_(); }
    std::string take_launches() const { return take_launches_(); }
    // The argument of the last K-from-V rebuild launch.
    KFromVRebuildArgs last_rebuild() const {
        KFromVRebuildArgs args{};
        std::memcpy(static_cast<void*>(&args), last_rebuild_(), sizeof args);
        return args;
    }

private:
    void* handle_ = nullptr;
    const char* (*last_launch_)() = nullptr;
    int (*module_loads_)() = nullptr;
    int (*tensor_maps_)() = nullptr;
    const char* (*take_launches_)() = nullptr;
    const void* (*last_rebuild_)() = nullptr;
};

// The built bundle copied into a temp dir (so a test can damage it), opened.
class BundleCopy {
public:
    BundleCopy() : path_(tmp_.path() + "/bundle") {
        REQUIRE(std::system(("cp -r '" + test::built_bundle() + "' '" + path_ + "'").c_str()) == 0);
        std::string err;
        REQUIRE_MESSAGE(load_manifest(path_, &manifest_, &err), err);
        arch_ = fake_arch(manifest_);
        REQUIRE(wideattn_open(&ctx_, path_.c_str()) == WIDEATTN_OK);
    }
    ~BundleCopy() { wideattn_close(ctx_); }
    BundleCopy(const BundleCopy&) = delete;
    BundleCopy& operator=(const BundleCopy&) = delete;
    wideattn_context* ctx() const { return ctx_; }
    const std::string& path() const { return path_; }
    const std::string& arch() const { return arch_; }
    // The kernel entry of this name for the fake device's arch (nullptr if the bundle has none).
    const ManifestKernel* kernel(const std::string& name) const {
        for (const ManifestKernel& k : manifest_.kernels)
            if (k.name == name && k.arch == arch_) return &k;
        return nullptr;
    }
    std::string cubin_path(const ManifestKernel& k) const { return path_ + "/" + k.cubin; }

private:
    test::TempDir tmp_;
    std::string path_;
    Manifest manifest_;
    std::string arch_;
    wideattn_context* ctx_ = nullptr;
};

wideattn_prefill_params reference_params() {
    wideattn_prefill_params p = test::valid_params();
    p.o_dtype = WIDEATTN_DTYPE_F64;
    return p;
}

std::string last_error() { return wideattn_last_error(); }

}  // namespace

TEST_CASE("fake driver: a launch reads, checks and loads the cubin once per context") {
    const FakeDriver driver;
    const BundleCopy bundle;
    REQUIRE(bundle.kernel("reference_f64"));
    const wideattn_prefill_params p = reference_params();
    const int loads = driver.module_loads();
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.last_launch() == "wideattn_reference_f64");
    CHECK(driver.module_loads() == loads + 1);
    REQUIRE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK);
    CHECK(driver.module_loads() == loads + 1);  // loaded once per (CUDA context, kernel)
}

TEST_CASE("fake driver: a damaged cubin fails its kernel's first launch, naming the file") {
    const FakeDriver driver;
    const BundleCopy bundle;
    const ManifestKernel* reference = bundle.kernel("reference_f64");
    REQUIRE(reference);
    const std::string cubin = bundle.cubin_path(*reference);
    const std::string image = test::read_file(cubin);
    const wideattn_prefill_params p = reference_params();
    std::string expected;

    SUBCASE("corrupt, same size") {
        std::string corrupt = image;
        corrupt[corrupt.size() / 2] ^= 0x5a;
        test::write_file(cubin, corrupt);
        expected = "cubin " + cubin + " checksum ";
        CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
        CHECK(last_error().find("does not match the manifest's " + reference->cubin_fnv1a64 + " (corrupt file)") !=
              std::string::npos);
    }
    SUBCASE("truncated") {
        test::write_file(cubin, image.substr(0, 100));
        expected = "cubin " + cubin + " has 100 bytes, manifest says " + std::to_string(image.size()) +
                   " (truncated or replaced file)";
        CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
    }
    SUBCASE("missing") {
        std::remove(cubin.c_str());
        expected = "cannot read cubin " + cubin + " of kernel reference_f64 (" + bundle.arch() + "): cannot open " + cubin;
        CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
    }
    SUBCASE("a directory in its place: a status, not an exception through the C ABI") {
        std::remove(cubin.c_str());
        REQUIRE(mkdir(cubin.c_str(), 0700) == 0);
        expected = "cannot read cubin " + cubin + " of kernel reference_f64 (" + bundle.arch() + "): " + cubin +
                   " is a directory, not a regular file";
        CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
    }
    CHECK_MESSAGE(last_error().find(expected) == 0, last_error());
    // The same launch fails the same way again (nothing half-loaded is kept) ...
    CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
    CHECK(last_error().find(expected) == 0);
    // ... and the other kernels of the bundle still launch.
    if (bundle.kernel("mma_bf16_d512")) {
        const wideattn_prefill_params bf16 = test::valid_params();
        REQUIRE(wideattn_set_prefill_kernel(bundle.ctx(), "mma_bf16_d512") == WIDEATTN_OK);
        CHECK_MESSAGE(wideattn_prefill(bundle.ctx(), &bf16, nullptr) == WIDEATTN_OK, last_error());
        CHECK(driver.last_launch() == "wideattn_mma_bf16_d512");
    }
}

TEST_CASE("fake driver: a cubin damaged after its first load serves that context, fails a new one") {
    const FakeDriver driver;
    const BundleCopy bundle;
    const ManifestKernel* reference = bundle.kernel("reference_f64");
    REQUIRE(reference);
    const wideattn_prefill_params p = reference_params();
    REQUIRE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK);
    test::write_file(bundle.cubin_path(*reference), "not a cubin");
    CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK);
    wideattn_context* fresh = nullptr;
    REQUIRE(wideattn_open(&fresh, bundle.path().c_str()) == WIDEATTN_OK);
    CHECK(wideattn_prefill(fresh, &p, nullptr) == WIDEATTN_ERROR_BUNDLE);
    CHECK(last_error().find("(truncated or replaced file)") != std::string::npos);
    wideattn_close(fresh);
}

TEST_CASE("fake driver: K/V caches tensor maps cannot describe take the mma kernel or a named refusal") {
    const FakeDriver driver;
    const BundleCopy bundle;
    if (!bundle.kernel("wgmma_bf16_d512") || !bundle.kernel("mma_bf16_d512")) {
        MESSAGE("the bundle has no wgmma_bf16_d512 and mma_bf16_d512 for " << bundle.arch() << ": skipped");
        return;
    }
    wideattn_prefill_params p = test::valid_params();
    int maps = driver.tensor_maps();
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.last_launch() == "wideattn_wgmma_bf16_d512");
    CHECK(driver.tensor_maps() == maps + 2);  // K and V
    if (bundle.kernel("wgmma_bf16c2p_d512")) {
        // With the hint, the shorter of the two sequences has 50 query tokens: the two-CTA kernel
        // (the BF16 prefill default, wgmma_bf16c2p_d512).
        p.max_seqlen_q = 50;
        REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
        CHECK(driver.last_launch() == "wideattn_wgmma_bf16c2p_d512");
        p.max_seqlen_q = 0;
    }
    maps = driver.tensor_maps();

    // One block: its stride is never applied, so the call is valid, but 2^63 bytes is no TMA
    // stride: the mma kernel runs, and the driver is never asked for a map.
    p.num_blocks = 1;
    p.k_block_stride = k2to62;
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.last_launch() == "wideattn_mma_bf16_d512");
    CHECK(driver.tensor_maps() == maps);

    // A slot stride of 2^62 elements takes 15 slots past 2^63 bytes: refused before any driver
    // call, naming the field (it used to wrap, pass as describable and fail in the driver).
    p = test::valid_params();
    p.k_slot_stride = k2to62;
    CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("k_slot_stride=4611686018427387904 with block_size=16 puts the last element of k_cache") ==
          0);
    CHECK(driver.tensor_maps() == maps);
}

namespace {

// Whether the bundle has the kernels the split-KV cases launch (wgmma_bf16_d512 and
// merge_splits_bf16); a message says the case is skipped when it has not.
bool has_split_kernels(const BundleCopy& bundle) {
    if (bundle.kernel("wgmma_bf16_d512") && bundle.kernel("merge_splits_bf16")) return true;
    MESSAGE("the bundle has no wgmma_bf16_d512 and merge_splits_bf16 for " << bundle.arch() << ": skipped");
    return false;
}

}  // namespace

TEST_CASE("fake driver: a decode call launches the split entry over grid.z, then the merge kernel") {
    const FakeDriver driver;
    const BundleCopy bundle;
    if (!has_split_kernels(bundle)) return;
    // One sequence, one new token, 32k keys: 4 blocks (one per KV head) on the fake's 132 SMs.
    wideattn_prefill_params p = test::valid_params();
    p.num_seqs = 1;
    p.total_q = 1;
    p.max_seqlen_q = 1;
    p.max_seqlen_k = 32768;
    int64_t bytes = 0;
    REQUIRE_MESSAGE(wideattn_workspace_size(bundle.ctx(), &p, &bytes) == WIDEATTN_OK, last_error());
    CHECK(bytes > 0);
    driver.take_launches();
    // BF16 single-token decode goes to decode_bf16w4_d512 where the bundle has it.
    const std::string kernel = bundle.kernel("decode_bf16w4_d512") ? "decode_bf16w4_d512" : "wgmma_bf16_d512";
    // Without a workspace the call runs unsplit.
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.take_launches() == "wideattn_" + kernel + " 1 4 1\n");
    p.workspace = reinterpret_cast<void*>(uintptr_t{0x60000000});
    p.workspace_bytes = bytes;
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    // 32 splits (128 of 132 SMs), then 32 rows (1 token x 32 heads) merged: one row a block by
    // merge_splits_bf16_rows on sm_90a, 4 per block by merge_splits_bf16 elsewhere.
    const std::string merge = bundle.arch() == "sm_90a" && bundle.kernel("merge_splits_bf16_rows")
                                  ? "wideattn_merge_splits_bf16_rows 32 1 1\n"
                                  : "wideattn_merge_splits_bf16 8 1 1\n";
    CHECK(driver.take_launches() == "wideattn_" + kernel + "_split 1 4 32\n" + merge);
    // A forced count beyond the workspace is refused, naming the field; the context keeps working.
    p.num_splits = 64;
    CHECK(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("workspace_bytes=" + std::to_string(bytes) + " is too small for num_splits=64") == 0);
    CHECK(driver.take_launches().empty());
    p.num_splits = 2;
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.take_launches() == "wideattn_" + kernel + "_split 1 4 2\n" + merge);
    // The mma tier splits the same way through its own split entry.
    REQUIRE(wideattn_set_prefill_kernel(bundle.ctx(), "mma_bf16_d512") == WIDEATTN_OK);
    p.num_splits = 0;
    REQUIRE_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.take_launches() == "wideattn_mma_bf16_d512_split 1 4 32\n" + merge);
}

TEST_CASE("fake driver: a forced split count on an empty batch needs no workspace and launches nothing") {
    const FakeDriver driver;
    const BundleCopy bundle;
    if (!has_split_kernels(bundle)) return;
    wideattn_prefill_params p = test::valid_params();
    p.total_q = 0;
    p.num_splits = 8;
    wideattn_launch_plan plan{};
    REQUIRE_MESSAGE(wideattn_plan_launch(bundle.ctx(), &p, 9, 0, kFakeSms, &plan) == WIDEATTN_OK, last_error());
    CHECK(plan.num_splits == 8);
    CHECK(plan.workspace_bytes == 0);
    int64_t bytes = -1;
    REQUIRE_MESSAGE(wideattn_workspace_size(bundle.ctx(), &p, &bytes) == WIDEATTN_OK, last_error());
    CHECK(bytes == 0);
    driver.take_launches();
    // The plan's 0 bytes are enough: no workspace, nothing launched.
    CHECK_MESSAGE(wideattn_prefill(bundle.ctx(), &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.take_launches() == "");
}

TEST_CASE("fake driver: quantise and scale kernels load lazily too") {
    const FakeDriver driver;
    const BundleCopy bundle;
    const ManifestKernel* quantize = bundle.kernel("quantize_e4m3");
    if (!quantize || !bundle.kernel("amax_e4m3")) {
        MESSAGE("the bundle has no quantize_e4m3 and amax_e4m3 for " << bundle.arch() << ": skipped");
        return;
    }
    const wideattn_scale_params s = test::valid_scale_params();
    CHECK_MESSAGE(wideattn_compute_scale(bundle.ctx(), &s, nullptr) == WIDEATTN_OK, last_error());
    CHECK(driver.last_launch() == "wideattn_amax_e4m3");
    if (bundle.kernel("amax_e4m3_pow2")) {
        CHECK_MESSAGE(wideattn_compute_scale_pow2(bundle.ctx(), &s, nullptr) == WIDEATTN_OK, last_error());
        CHECK(driver.last_launch() == "wideattn_amax_e4m3_pow2");
        CHECK_MESSAGE(wideattn_compute_scale(bundle.ctx(), &s, nullptr) == WIDEATTN_OK, last_error());
        CHECK(driver.last_launch() == "wideattn_amax_e4m3");
    }
    test::write_file(bundle.cubin_path(*quantize), "");
    const wideattn_quantize_params q = test::valid_quantize_params();
    CHECK(wideattn_quantize_to_cache(bundle.ctx(), &q, nullptr) == WIDEATTN_ERROR_BUNDLE);
    CHECK(last_error() == "cubin " + bundle.cubin_path(*quantize) + " has 0 bytes, manifest says " +
                              std::to_string(quantize->cubin_bytes) + " (truncated or replaced file)");
}

TEST_CASE("fake driver: a K-from-V rebuild launches its kernel with the validated copies, grid over pages and heads") {
    const FakeDriver driver;
    const BundleCopy bundle;
    if (!bundle.kernel("k_from_v_rebuild")) {
        MESSAGE("the bundle has no k_from_v_rebuild for " << bundle.arch() << ": skipped");
        return;
    }
    wideattn_prefill_params p = test::k_from_v_params();
    wideattn_k_from_v_rebuild_out out{};
    const int64_t slot = int64_t{p.num_kv_heads} * p.head_dim;
    out.struct_size = sizeof(out);
    out.k_cache = reinterpret_cast<void*>(uintptr_t{0x80000000});
    out.v_cache = reinterpret_cast<void*>(uintptr_t{0xa0000000});
    out.k_head_stride = out.v_head_stride = p.head_dim;
    out.k_slot_stride = out.v_slot_stride = slot;
    out.k_block_stride = out.v_block_stride = slot * p.block_size;
    out.block_table = reinterpret_cast<const int32_t*>(uintptr_t{0xc0000000});
    out.block_table_stride = 40;
    out.num_blocks = 80;
    driver.take_launches();
    REQUIRE_MESSAGE(wideattn_k_from_v_rebuild(bundle.ctx(), &p, &out, nullptr) == WIDEATTN_OK, last_error());
    // 2 sequences x min(1024, 40) table entries; a block takes every KV head of its page.
    CHECK(driver.take_launches() == "wideattn_k_from_v_rebuild_kernel 80 1 1\n");
    const KFromVRebuildArgs seen = driver.last_rebuild();
    CHECK(seen.params.v_cache == p.v_cache);
    CHECK(seen.params.k_from_v == nullptr);  // the kernel reads the copy below, never a host pointer
    CHECK(seen.kfv.k_norm_scale == test::k_from_v_desc().k_norm_scale);
    CHECK(seen.kfv.rotary_dims == test::k_from_v_desc().rotary_dims);
    CHECK(seen.out.k_cache == out.k_cache);
    CHECK(seen.out.block_table_stride == 40);
    CHECK(seen.out.num_blocks == 80);
}
