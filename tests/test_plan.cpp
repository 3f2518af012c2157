// test_plan.cpp - plans (wideattn_plan_create / _run / _run_tensors / _get_info / _destroy)
// through the stand-in driver (tests/fake_driver/fake_libcuda.cpp): a plan launches what
// wideattn_prefill launches, with the run's tensors in the kernel argument; tensor maps are
// encoded once per cache (at creation for the caches listed, else at a cache's first run, then
// from the context's cache); the merge after a split kernel is a programmatic dependent launch
// on sm_90 (not on sm_89, nor with WIDEATTN_PDL=0); every refusal names what it refuses and
// launches nothing: bad handles (NULL, never made, destroyed, closed context, destroyed twice),
// another or no CUDA context, bad run tensors (NULL, misaligned, lse against the plan, past the
// address space, overlapping), a cache layout other than the plan's, and versioned structs of a
// bad size.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dispatch/dependent_launch.h"
#include "tests/fuzz/plan_fuzz_check.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

// The stand-in driver's counters and switches, read through the library libwideattn loaded.
class Fake {
public:
    Fake() {
        const char* path = std::getenv("WIDEATTN_LIBCUDA");
        REQUIRE(path);
        handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle_, dlerror());
        take_launches_ = symbol<const char* (*)()>("fake_cuda_take_launches");
        tensor_maps_ = symbol<int (*)()>("fake_cuda_tensor_maps");
        launches_ = symbol<int (*)()>("fake_cuda_kernel_launches");
        last_args_ = symbol<const void* (*)()>("fake_cuda_last_args");
        last_k_from_v_ = symbol<const void* (*)()>("fake_cuda_last_k_from_v");
        set_context_ = symbol<void (*)(int)>("fake_cuda_set_current_context");
        set_launch_ex_fails_ = symbol<void (*)(int)>("fake_cuda_set_launch_ex_fails");
        copies_ = symbol<int (*)()>("fake_cuda_device_copies");
        take_programmatic_ = symbol<const char* (*)()>("fake_cuda_take_programmatic_launches");
        take_launches_();
        take_programmatic_();
    }
    ~Fake() {
        set_context_(0);
        set_launch_ex_fails_(0);
        dlclose(handle_);
    }
    Fake(const Fake&) = delete;
    Fake& operator=(const Fake&) = delete;
    std::string take_launches() const { return take_launches_(); }
    // The symbols launched with programmatic stream serialization since the last call.
    std::string take_programmatic() const { return take_programmatic_(); }
    int tensor_maps() const { return tensor_maps_(); }
    int launches() const { return launches_(); }
    wideattn_prefill_params last_args() const {
        wideattn_prefill_params p;
        std::memcpy(&p, last_args_(), sizeof p);
        return p;
    }
    // The second argument of the last launch of reference_f64 (its K-from-V description).
    wideattn_k_from_v last_k_from_v() const {
        wideattn_k_from_v d;
        std::memcpy(&d, last_k_from_v_(), sizeof d);
        return d;
    }
    void set_context(int index) const { set_context_(index); }
    void set_launch_ex_fails(int fail) const { set_launch_ex_fails_(fail); }
    int copies() const { return copies_(); }

private:
    template <typename F>
    F symbol(const char* name) {
        void* f = dlsym(handle_, name);
        REQUIRE_MESSAGE(f != nullptr, name);
        return reinterpret_cast<F>(f);
    }
    void* handle_ = nullptr;
    const char* (*take_launches_)() = nullptr;
    int (*tensor_maps_)() = nullptr;
    int (*launches_)() = nullptr;
    const void* (*last_args_)() = nullptr;
    const void* (*last_k_from_v_)() = nullptr;
    void (*set_context_)(int) = nullptr;
    void (*set_launch_ex_fails_)(int) = nullptr;
    int (*copies_)() = nullptr;
    const char* (*take_programmatic_)() = nullptr;
};

// A context on the built bundle; `ok` is false (with a message) where the bundle has no
// wgmma_bf16_d512 + merge_splits_bf16_rows (the sm_90a merge) for sm_90a, which the cases below
// launch.
struct Context {
    wideattn_context* ctx = nullptr;
    bool ok = false;
    Context() {
        REQUIRE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK);
        bool tma = false, merge = false;
        for (int32_t i = 0; i < wideattn_kernel_count(ctx); ++i) {
            wideattn_kernel_info info{};
            REQUIRE(wideattn_get_kernel_info(ctx, i, &info) == WIDEATTN_OK);
            tma |= std::string(info.name) == "wgmma_bf16_d512" && std::string(info.arch) == "sm_90a";
            merge |= std::string(info.name) == "merge_splits_bf16_rows" && std::string(info.arch) == "sm_90a";
        }
        ok = tma && merge;
        if (!ok) MESSAGE("the bundle has no wgmma_bf16_d512 and merge_splits_bf16_rows for sm_90a: skipped");
        // The plans are checked on the kernel that reads K/V by TMA, whose tensor maps they cache: a
        // BF16 single-token step otherwise goes to decode_bf16w4_d512 (cp.async, no tensor maps).
        if (ok) REQUIRE(wideattn_set_prefill_kernel(ctx, "wgmma_bf16_d512") == WIDEATTN_OK);
    }
    ~Context() { wideattn_close(ctx); }
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
};

std::string last_error() { return wideattn_last_error(); }

void* at(uintptr_t address) { return reinterpret_cast<void*>(address); }

// One decode step of 4 sequences (the python_overhead shape: 4 x 256 keys) without the run's
// tensors, which valid_params places at 0x10000000 (q), 0x20000000 / 0x30000000 (K/V), 0x40000000 (o).
wideattn_prefill_params step_params() {
    wideattn_prefill_params p = test::valid_params();
    p.num_seqs = 4;
    p.total_q = 4;
    p.max_seqlen_q = 1;
    p.max_seqlen_k = 256;
    p.q = p.k_cache = p.v_cache = nullptr;
    p.o = nullptr;
    return p;
}

// A layer's tensors: layer i's K/V caches at 0x100000000 + i x 2^30 (beyond valid_params' windows).
struct Layer {
    const void* q = at(0x10000000);
    const void* k = nullptr;
    const void* v = nullptr;
    void* o = at(0x40000000);
    explicit Layer(int i)
        : k(at(0x100000000ull + uintptr_t(i) * 0x80000000ull)),
          v(at(0x100000000ull + uintptr_t(i) * 0x80000000ull + 0x40000000ull)) {}
};

// The decode step of one sequence over 32k keys (32 splits on the fake device's 132 SMs) with the
// workspace wideattn_workspace_size asks for at 0x60000000.
wideattn_prefill_params split_step_params(const wideattn_context* ctx) {
    wideattn_prefill_params p = step_params();
    p.num_seqs = 1;
    p.total_q = 1;
    p.max_seqlen_k = 32768;
    int64_t bytes = 0;
    wideattn_prefill_params sized = p;
    sized.q = sized.k_cache = sized.v_cache = at(0x10000000);
    sized.o = at(0x40000000);
    REQUIRE_MESSAGE(wideattn_workspace_size(ctx, &sized, &bytes) == WIDEATTN_OK, wideattn_last_error());
    p.workspace = at(0x60000000);
    p.workspace_bytes = bytes;
    return p;
}

// The params of `p` with a layer's tensors (what wideattn_prefill takes).
wideattn_prefill_params with_tensors(wideattn_prefill_params p, const Layer& layer) {
    p.q = layer.q;
    p.k_cache = layer.k;
    p.v_cache = layer.v;
    p.o = layer.o;
    return p;
}

wideattn_plan_tensors tensors_of(const Layer& layer) {
    wideattn_plan_tensors t{};
    t.struct_size = sizeof t;
    t.q = layer.q;
    t.k_cache = layer.k;
    t.v_cache = layer.v;
    t.o = layer.o;
    return t;
}

}  // namespace

TEST_CASE("plan: runs launch what wideattn_prefill launches, with each run's tensors in the argument") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    REQUIRE(plan);
    fake.take_launches();
    for (int i = 0; i < 10; ++i) {
        const Layer layer(i);
        REQUIRE_MESSAGE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK,
                        last_error());
        const wideattn_prefill_params seen = fake.last_args();
        CHECK(seen.k_cache == layer.k);
        CHECK(seen.v_cache == layer.v);
        CHECK(seen.q == layer.q);
        CHECK(seen.o == layer.o);
        CHECK(seen.cu_seqlens_q == p.cu_seqlens_q);
    }
    const std::string runs = fake.take_launches();
    // The same call through wideattn_prefill launches the same kernel on the same grid.
    wideattn_prefill_params full = p;
    const Layer layer(0);
    full.q = layer.q;
    full.k_cache = layer.k;
    full.v_cache = layer.v;
    full.o = layer.o;
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK, last_error());
    const std::string once = fake.take_launches();
    CHECK(once == "wideattn_wgmma_bf16_d512 4 4 1\n");
    std::string ten;
    for (int i = 0; i < 10; ++i) ten += once;
    CHECK(runs == ten);
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: tensor maps are encoded once per cache, at creation for the caches listed") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    constexpr int kLayers = 10;
    std::vector<const void*> ks, vs;
    for (int i = 0; i < kLayers; ++i) ks.push_back(Layer(i).k), vs.push_back(Layer(i).v);
    SUBCASE("listed") {
        wideattn_plan_options options{};
        options.struct_size = sizeof options;
        options.num_caches = kLayers;
        options.k_caches = ks.data();
        options.v_caches = vs.data();
        const int before = fake.tensor_maps();
        wideattn_plan* plan = nullptr;
        REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, &options, &plan) == WIDEATTN_OK, last_error());
        CHECK(fake.tensor_maps() == before + 2 * kLayers);
        wideattn_plan_info info{};
        info.struct_size = sizeof info;
        REQUIRE(wideattn_plan_get_info(plan, &info) == WIDEATTN_OK);
        CHECK(info.num_cached_maps == kLayers);
        CHECK(info.tma_kv == 1);
        for (int step = 0; step < 3; ++step)
            for (int i = 0; i < kLayers; ++i) {
                const Layer layer(i);
                REQUIRE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK);
            }
        CHECK(fake.tensor_maps() == before + 2 * kLayers);  // none at run time
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    }
    SUBCASE("not listed: encoded at the first run, then from the context's cache, across plans") {
        const int before = fake.tensor_maps();
        for (int step = 0; step < 3; ++step) {
            wideattn_plan* plan = nullptr;
            REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
            for (int i = 0; i < kLayers; ++i) {
                const Layer layer(i);
                REQUIRE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK);
            }
            CHECK(fake.tensor_maps() == before + 2 * kLayers);
            CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
        }
    }
    SUBCASE("wideattn_prefill uses the context's cache too") {
        const int before = fake.tensor_maps();
        wideattn_prefill_params full = p;
        const Layer layer(0);
        full.q = layer.q;
        full.k_cache = layer.k;
        full.v_cache = layer.v;
        full.o = layer.o;
        for (int i = 0; i < 5; ++i) REQUIRE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK);
        CHECK(fake.tensor_maps() == before + 2);
        // Another layout over the same base is another map.
        full.num_blocks = 1024;
        REQUIRE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK);
        CHECK(fake.tensor_maps() == before + 4);
    }
}

TEST_CASE("plan: a split decode plan launches the split entry and the merge per run") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = split_step_params(c.ctx);
    const int64_t bytes = p.workspace_bytes;
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    wideattn_plan_info info{};
    info.struct_size = sizeof info;
    REQUIRE(wideattn_plan_get_info(plan, &info) == WIDEATTN_OK);
    CHECK(info.launch.num_splits == 32);
    CHECK(info.launch.workspace_bytes == bytes);
    CHECK(info.has_lse == 0);
    fake.take_launches();
    const Layer layer(3);
    REQUIRE_MESSAGE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK,
                    last_error());
    CHECK(fake.take_launches() == "wideattn_wgmma_bf16_d512_split 1 4 32\nwideattn_merge_splits_bf16_rows 32 1 1\n");
    CHECK(fake.last_args().num_splits == 32);
    CHECK(fake.last_args().o == layer.o);
    // The output may not overlap the workspace the plan holds.
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, at(0x60000000), nullptr, nullptr) ==
          WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(last_error().find("o (bytes 0x60000000..") == 0, last_error());
    CHECK(last_error().find("overlaps workspace (bytes 0x60000000..") != std::string::npos);
    CHECK(fake.take_launches().empty());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: on sm_90 the merge is a programmatic dependent launch, the split kernel not; WIDEATTN_PDL=0 stops it") {
    const Fake fake;
    const Layer layer(3);
    const std::string split_launches =
        "wideattn_wgmma_bf16_d512_split 1 4 32\nwideattn_merge_splits_bf16_rows 32 1 1\n";
    for (const char* value : {static_cast<const char*>(nullptr), "1", "0"}) {
        CAPTURE(value ? value : "(unset)");
        const test::ScopedEnv env(kPdlEnv, value);
        const Context c;  // reads WIDEATTN_PDL at open
        if (!c.ok) return;
        const std::string programmatic =
            value && std::string(value) == "0" ? "" : "wideattn_merge_splits_bf16_rows\n";
        const wideattn_prefill_params p = split_step_params(c.ctx);
        wideattn_plan* plan = nullptr;
        REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
        fake.take_launches();
        fake.take_programmatic();
        REQUIRE_MESSAGE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK,
                        last_error());
        CHECK(fake.take_launches() == split_launches);
        CHECK(fake.take_programmatic() == programmatic);
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
        // wideattn_prefill runs the same path; an unsplit call launches nothing programmatically.
        wideattn_prefill_params full = with_tensors(p, layer);
        REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK, last_error());
        CHECK(fake.take_launches() == split_launches);
        CHECK(fake.take_programmatic() == programmatic);
        full.num_splits = 1;
        REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK, last_error());
        CHECK(fake.take_launches() == "wideattn_wgmma_bf16_d512 1 4 1\n");
        CHECK(fake.take_programmatic().empty());
    }
}

TEST_CASE("plan: on sm_89 the merge is a plain launch") {
    const Fake fake;
    const test::ScopedEnv cc("WIDEATTN_FAKE_CC", "89");
    const test::ScopedEnv pdl(kPdlEnv, "1");
    const Context c;
    // The dispatcher's own choice on sm_89 (Context pins the sm_90a TMA kernel where it exists).
    REQUIRE(wideattn_set_prefill_kernel(c.ctx, nullptr) == WIDEATTN_OK);
    bool split = false, merge = false;
    for (int32_t i = 0; i < wideattn_kernel_count(c.ctx); ++i) {
        wideattn_kernel_info info{};
        REQUIRE(wideattn_get_kernel_info(c.ctx, i, &info) == WIDEATTN_OK);
        split |= std::string(info.name) == "mma_bf16_d512" && std::string(info.arch) == "sm_89";
        merge |= std::string(info.name) == "merge_splits_bf16" && std::string(info.arch) == "sm_89";
    }
    if (!split || !merge) {
        MESSAGE("the bundle has no mma_bf16_d512 and merge_splits_bf16 for sm_89: skipped");
        return;
    }
    const Layer layer(3);
    wideattn_prefill_params full = with_tensors(split_step_params(c.ctx), layer);
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &full, nullptr) == WIDEATTN_OK, last_error());
    const std::string launches = fake.take_launches();
    CHECK_MESSAGE(launches.find("wideattn_mma_bf16_d512_split ") == 0, launches);
    CHECK_MESSAGE(launches.find("\nwideattn_merge_splits_bf16 ") != std::string::npos, launches);
    CHECK(fake.take_programmatic().empty());
}

TEST_CASE("plan: each launch is one cuLaunchKernelEx") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    wideattn_plan* plan = nullptr;
    REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK);
    const Layer layer(0);
    const int before = fake.launches();
    REQUIRE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK);
    CHECK(fake.launches() == before + 1);
    fake.set_launch_ex_fails(1);
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_ERROR_CUDA);
    CHECK_MESSAGE(last_error().find("cuLaunchKernelEx(wgmma_bf16_d512, grid 4x4x1) failed: ") == 0, last_error());
    fake.set_launch_ex_fails(0);
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: handles that are no live plan are refused, naming the plan") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    const Layer layer(0);
    const auto run = [&](const wideattn_plan* plan) {
        return wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr);
    };
    CHECK(run(nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "plan is NULL");
    wideattn_plan* plan = nullptr;
    REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK);
    const uintptr_t token = reinterpret_cast<uintptr_t>(plan);

    SUBCASE("never made") {
        for (const uintptr_t bogus : {uintptr_t{1}, uintptr_t{0xdeadbeef}, token + (uintptr_t{1} << 32),
                                      uintptr_t{0x7fff00000000}, ~uintptr_t{0}}) {
            const auto* fake_plan = reinterpret_cast<const wideattn_plan*>(bogus);
            CHECK(run(fake_plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
            CHECK_MESSAGE(last_error().find("is not a plan (no wideattn_plan_create returned it)") != std::string::npos,
                          last_error());
            wideattn_plan_info info{};
            info.struct_size = sizeof info;
            CHECK(wideattn_plan_get_info(fake_plan, &info) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        }
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    }
    SUBCASE("destroyed, destroyed twice, its slot reused") {
        REQUIRE(wideattn_plan_destroy(plan) == WIDEATTN_OK);
        CHECK(run(plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK_MESSAGE(last_error().find("is no longer live: it was destroyed (wideattn_plan_destroy)") !=
                          std::string::npos,
                      last_error());
        CHECK(last_error().find("plan=0x") == 0);
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);  // never a double free
        wideattn_plan* next = nullptr;
        REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &next) == WIDEATTN_OK);
        CHECK(next != plan);
        CHECK(run(plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);  // a new generation in the same slot
        CHECK(last_error().find("is no longer live: it was destroyed") != std::string::npos);
        CHECK(run(next) == WIDEATTN_OK);
        CHECK(wideattn_plan_destroy(next) == WIDEATTN_OK);
    }
    SUBCASE("its context closed") {
        wideattn_context* other = nullptr;
        REQUIRE(wideattn_open(&other, test::built_bundle().c_str()) == WIDEATTN_OK);
        wideattn_plan* orphan = nullptr;
        REQUIRE(wideattn_plan_create(other, &p, nullptr, &orphan) == WIDEATTN_OK);
        CHECK(run(orphan) == WIDEATTN_OK);
        wideattn_close(other);
        CHECK(run(orphan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK_MESSAGE(last_error().find("is no longer live: its context was closed") != std::string::npos,
                      last_error());
        CHECK(wideattn_plan_destroy(orphan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(run(plan) == WIDEATTN_OK);  // plans of other contexts live on
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    }
    SUBCASE("another CUDA context, or none") {
        fake.set_context(1);
        CHECK(run(plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK_MESSAGE(last_error().find("the plan was created in CUDA context 0x") == 0, last_error());
        CHECK(last_error().find("a plan runs in the CUDA context it was created in") != std::string::npos);
        fake.set_context(-1);
        CHECK(run(plan) == WIDEATTN_ERROR_NO_DEVICE);
        CHECK(last_error().find("current CUDA context is (nil)") != std::string::npos);
        fake.set_context(0);
        CHECK(fake.take_launches().empty());
        CHECK(run(plan) == WIDEATTN_OK);
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    }
    CHECK(wideattn_plan_destroy(nullptr) == WIDEATTN_OK);
}

TEST_CASE("plan: bad run tensors are refused with the argument named, nothing launched") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    wideattn_prefill_params p = step_params();
    const Layer layer(0);
    wideattn_plan* plan = nullptr;
    REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK);
    fake.take_launches();
    struct Case {
        const char* what;
        const void* q;
        const void* k;
        const void* v;
        void* o;
        void* lse;
        std::string message;  // the message's beginning
    };
    const std::vector<Case> cases = {
        {"q NULL", nullptr, layer.k, layer.v, layer.o, nullptr, "q is NULL"},
        {"k NULL", layer.q, nullptr, layer.v, layer.o, nullptr, "k_cache is NULL"},
        {"v NULL", layer.q, layer.k, nullptr, layer.o, nullptr, "v_cache is NULL"},
        {"o NULL", layer.q, layer.k, layer.v, nullptr, nullptr, "o is NULL"},
        {"o misaligned", layer.q, layer.k, layer.v, at(0x40000008), nullptr, "o=0x40000008 is not 16-byte aligned"},
        {"k misaligned", layer.q, at(0x20000004), layer.v, layer.o, nullptr,
         "k_cache=0x20000004 is not 16-byte aligned"},
        {"lse not planned", layer.q, layer.k, layer.v, layer.o, at(0x70000000),
         "lse=0x70000000 is set but the plan was created without an lse"},
        {"o on q", layer.q, layer.k, layer.v, at(0x10000000), nullptr, "o (bytes 0x10000000..0x1001ffff) overlaps q"},
        {"o on the K cache", layer.q, layer.k, layer.v, const_cast<void*>(layer.k), nullptr, "o (bytes 0x100000000.."},
        {"o on the block table", layer.q, layer.k, layer.v, at(0x50002000), nullptr, "o (bytes 0x50002000.."},
        {"o past the address space", layer.q, layer.k, layer.v, at(~uintptr_t{0xfff}), nullptr,
         "o=0xfffffffffffff000 plus the 131070 bytes to its last element runs past the end of the 64-bit address "
         "space"},
    };
    for (const Case& x : cases) {
        CAPTURE(x.what);
        CHECK(wideattn_plan_run(plan, x.q, x.k, x.v, x.o, x.lse, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK_MESSAGE(last_error().find(x.message) == 0, last_error());
    }
    CHECK(fake.take_launches().empty());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);

    // A plan created with an lse needs one in every run.
    p.lse = at(0x70000000);
    p.lse_head_stride = 4;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) ==
          WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "lse is NULL but the plan was created with an lse (every run of it writes one)");
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, at(0x70000002), nullptr) ==
          WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "lse=0x70000002 is not 4-byte aligned");
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, at(0x70001000), nullptr) == WIDEATTN_OK);
    CHECK(fake.last_args().lse == at(0x70001000));
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: a cache layout other than the plan's is refused by wideattn_plan_run_tensors") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    wideattn_plan* plan = nullptr;
    REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK);
    const Layer layer(2);
    wideattn_plan_tensors t = tensors_of(layer);
    CHECK_MESSAGE(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_OK, last_error());  // nothing stated
    t.k_block_stride = p.k_block_stride;
    t.num_blocks = p.num_blocks;
    t.head_dim = p.head_dim;
    t.kv_dtype_plus_one = WIDEATTN_DTYPE_BF16 + 1;
    CHECK_MESSAGE(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_OK, last_error());  // the same layout
    fake.take_launches();
    t.num_blocks = 4096;
    CHECK(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "tensors.num_blocks=4096 differs from the plan's 2048: the cache has another layout than "
                          "the plan was created for (create a plan for it)");
    t.num_blocks = 0;
    t.head_dim = 256;
    CHECK(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("tensors.head_dim=256 differs from the plan's 512") == 0);
    t.head_dim = 0;
    t.kv_dtype_plus_one = WIDEATTN_DTYPE_E4M3 + 1;
    CHECK(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("tensors.kv_dtype_plus_one=5 differs from the plan's 1") == 0);
    t.kv_dtype_plus_one = 0;
    t.v_slot_stride = 4096;
    CHECK(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("tensors.v_slot_stride=4096 differs from the plan's 2048") == 0);
    t.v_slot_stride = 0;
    CHECK(wideattn_plan_run_tensors(plan, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "tensors is NULL");
    t.reserved = 1;
    CHECK(wideattn_plan_run_tensors(plan, &t, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "tensors.reserved and tensors.reserved2 must be 0");
    CHECK(fake.take_launches().empty());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: versioned structs of a bad size and bad options are refused") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    const wideattn_prefill_params p = step_params();
    wideattn_plan* plan = reinterpret_cast<wideattn_plan*>(uintptr_t{1});
    CHECK(wideattn_plan_create(c.ctx, &p, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "plan (the output pointer) is NULL");
    CHECK(wideattn_plan_create(nullptr, &p, nullptr, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(plan == nullptr);
    CHECK(last_error() == "ctx is NULL");

    // A struct of a newer header: larger, its unknown bytes zero (accepted) or not (refused).
    struct Newer {
        wideattn_plan_options options;
        uint64_t future;
    } newer{};
    newer.options.struct_size = sizeof newer;
    CHECK_MESSAGE(wideattn_plan_create(c.ctx, &p, &newer.options, &plan) == WIDEATTN_OK, last_error());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    newer.future = 1;
    CHECK(wideattn_plan_create(c.ctx, &p, &newer.options, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "wideattn_plan_options.struct_size=40 is larger than this library's 32 and byte 32 is not "
                          "zero: it sets a field this library does not know (a newer header; use its library)");
    wideattn_plan_options o{};
    CHECK(wideattn_plan_create(c.ctx, &p, &o, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "wideattn_plan_options.struct_size=0 is below 32, the size of its first version (C API "
                          "0.4.0): set it to sizeof(wideattn_plan_options)");
    o.struct_size = sizeof o;
    o.flags = 4;
    CHECK(wideattn_plan_create(c.ctx, &p, &o, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "options.flags=4 has unknown bits (no option flag is defined: pass 0)");
    o.flags = 0;
    o.num_caches = -1;
    CHECK(wideattn_plan_create(c.ctx, &p, &o, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "options.num_caches=-1 is outside 0..WIDEATTN_PLAN_MAX_CACHES=1024");
    o.num_caches = 2;
    CHECK(wideattn_plan_create(c.ctx, &p, &o, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "options.k_caches is NULL with num_caches=2");
    const void* ks[] = {Layer(0).k, at(0x100000008)};
    const void* vs[] = {Layer(0).v, Layer(1).v};
    o.k_caches = ks;
    o.v_caches = vs;
    CHECK(wideattn_plan_create(c.ctx, &p, &o, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "options.k_caches[1]=0x100000008 is not 16-byte aligned");
    CHECK(plan == nullptr);

    // The params are validated as wideattn_prefill validates them (the run's tensors may be NULL).
    wideattn_prefill_params bad = p;
    bad.block_size = 8;
    CHECK(wideattn_plan_create(c.ctx, &bad, nullptr, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "block_size=8 is not a positive multiple of 16");
    bad = p;
    bad.cu_seqlens_q = nullptr;
    CHECK(wideattn_plan_create(c.ctx, &bad, nullptr, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "cu_seqlens_q is NULL");

    // Plan info: struct_size below the first version is refused; the caller's size is kept.
    REQUIRE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK);
    wideattn_plan_info info{};
    CHECK(wideattn_plan_get_info(plan, &info) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("wideattn_plan_info.struct_size=0 is below 48") == 0);
    CHECK(wideattn_plan_get_info(plan, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    info.struct_size = sizeof info;
    REQUIRE(wideattn_plan_get_info(plan, &info) == WIDEATTN_OK);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.launch.num_splits == 1);
    CHECK(info.checked == 0);
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: checked mode checks the metadata at every run") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    // Host arrays passed as device pointers (the stand-in's copies are memcpy).
    std::vector<int32_t> cu{0, 1, 2, 3, 4}, lens{256, 256, 256, 256}, table(4 * 16, 0);
    wideattn_prefill_params p = step_params();
    p.cu_seqlens_q = cu.data();
    p.seq_lens_k = lens.data();
    p.block_table = table.data();
    p.block_table_stride = 16;
    p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    const Layer layer(0);
    const int copies = fake.copies();
    REQUIRE_MESSAGE(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) == WIDEATTN_OK,
                    last_error());
    CHECK(fake.copies() > copies);
    table[3] = 5000;  // the metadata changed on the "device" between runs
    fake.take_launches();
    CHECK(wideattn_plan_run(plan, layer.q, layer.k, layer.v, layer.o, nullptr, nullptr) ==
          WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(last_error().find("block_table[0][3] = 5000") == 0, last_error());
    CHECK(fake.take_launches().empty());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: random programs of plan calls keep the fuzzing invariants (tests/fuzz/fuzz_plan.cpp)") {
    constexpr uint8_t kKPlusV = 0, kKFromVValid = 1;  // the program's K-from-V byte: off, or on without writes
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    std::mt19937_64 rng(20261201);
    std::vector<uint8_t> input;
    fuzz::PlanFuzzStats stats;
    for (int i = 0; i < 3000; ++i) {
        input.resize(rng() % 200);
        for (uint8_t& b : input) b = static_cast<uint8_t>(rng());
        // Half the programs keep the params valid (no field writes), so their plans are created
        // and the run, info and destroy paths get exercised: a K+V call, or (every other one) the
        // K-from-V call with a valid description.
        if (!input.empty() && (i & 1)) input[0] = 0;
        if (input.size() > 1 && (i & 1)) input[1] = (i & 2) ? kKFromVValid : kKPlusV;
        const std::string problem = fuzz::plan_input_problem(c.ctx, input.data(), input.size(), &stats);
        CAPTURE(i);
        REQUIRE_MESSAGE(problem.empty(), problem);
    }
    MESSAGE("plans created: " << stats.created << ", calls: " << stats.calls << ", succeeded: " << stats.succeeded);
    CHECK(stats.created > 1000);
    CHECK(stats.succeeded > 1000);
    CHECK(stats.calls - stats.succeeded > 10000);
}

namespace {

// K from V over valid_params' shapes for the fp64 reference (o_dtype F64).
wideattn_prefill_params k_from_v_call() {
    wideattn_prefill_params p = test::k_from_v_params();
    p.o_dtype = WIDEATTN_DTYPE_F64;
    return p;
}

}  // namespace

TEST_CASE("plan: K from V selects reference_f64, which gets the description as its second argument") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    wideattn_prefill_params p = k_from_v_call();
    int32_t index = -1;
    REQUIRE_MESSAGE(wideattn_is_supported(c.ctx, &p, 9, 0, &index) == WIDEATTN_OK, last_error());
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(c.ctx, index, &info) == WIDEATTN_OK);
    CHECK(std::string(info.name) == "reference_f64");
    CHECK(std::string(info.features).find("k_from_v") != std::string::npos);

    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &p, nullptr) == WIDEATTN_OK, last_error());
    CHECK(fake.take_launches().find("wideattn_reference_f64 ") == 0);
    const wideattn_k_from_v sent = fake.last_k_from_v();
    CHECK(std::memcmp(&sent, &test::k_from_v_desc(), sizeof sent) == 0);
    CHECK(fake.last_args().k_cache == nullptr);
    CHECK(fake.last_args().k_from_v == &test::k_from_v_desc());

    // A K+V call to the same kernel passes an all-zero description.
    wideattn_prefill_params kv = test::valid_params();
    kv.o_dtype = WIDEATTN_DTYPE_F64;
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &kv, nullptr) == WIDEATTN_OK, last_error());
    const wideattn_k_from_v zeros{};
    const wideattn_k_from_v none = fake.last_k_from_v();
    CHECK(std::memcmp(&none, &zeros, sizeof none) == 0);
}

TEST_CASE("plan: K from V is refused by every kernel without the feature") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    wideattn_prefill_params p = test::k_from_v_params();  // o_dtype bf16: no k_from_v kernel
    int32_t index = -1;
    CHECK(wideattn_is_supported(c.ctx, &p, 9, 0, &index) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK_MESSAGE(last_error().find("wgmma_bf16_d512 reads K from k_cache and cannot rebuild it from V "
                                    "(WIDEATTN_FLAG_K_FROM_V needs a kernel with the k_from_v feature") !=
                      std::string::npos,
                  last_error());
    CHECK_MESSAGE(last_error().find("rebuild K and V into a bf16 scratch with wideattn_k_from_v_rebuild and call "
                                    "wideattn_prefill on it without WIDEATTN_FLAG_K_FROM_V") != std::string::npos,
                  last_error());
    REQUIRE(wideattn_set_prefill_kernel(c.ctx, "mma_bf16_d512") == WIDEATTN_OK);
    CHECK(wideattn_is_supported(c.ctx, &p, 9, 0, &index) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK_MESSAGE(last_error().find("mma_bf16_d512 reads K from k_cache") != std::string::npos, last_error());
    CHECK(last_error().find("wideattn_k_from_v_rebuild") != std::string::npos);
    REQUIRE(wideattn_set_prefill_kernel(c.ctx, nullptr) == WIDEATTN_OK);
    const int launches = fake.launches();
    CHECK(wideattn_prefill(c.ctx, &p, nullptr) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(fake.launches() == launches);
}

TEST_CASE("plan: a K-from-V plan keeps its own copy of the description and runs without k_cache") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    wideattn_prefill_params p = k_from_v_call();
    const void* q = p.q;
    const void* v = p.v_cache;
    void* o = p.o;
    p.q = p.v_cache = nullptr;
    p.o = nullptr;
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    const wideattn_k_from_v created = test::k_from_v_desc();
    test::k_from_v_desc().rope_theta = -1.0f;  // the caller's struct may change or go away after creation
    REQUIRE_MESSAGE(wideattn_plan_run(plan, q, nullptr, v, o, nullptr, nullptr) == WIDEATTN_OK, last_error());
    const wideattn_k_from_v sent = fake.last_k_from_v();
    CHECK(std::memcmp(&sent, &created, sizeof sent) == 0);
    CHECK(wideattn_plan_run(plan, q, at(0x20000000), v, o, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() ==
          "k_cache=0x20000000 is set but the plan rebuilds K from v_cache (WIDEATTN_FLAG_K_FROM_V): pass NULL");
    CHECK(wideattn_plan_run(plan, q, nullptr, nullptr, o, nullptr, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "v_cache is NULL");
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

namespace {

// What the kernel got of a caller's K-from-V description of an older C API: `desc` cut to its first
// `size` bytes, ending exactly where an inaccessible page begins (a read past it faults), run once
// through wideattn_prefill and once through a plan of k_from_v_call()'s params.
struct SentDescriptions {
    wideattn_k_from_v once{}, planned{};
};
SentDescriptions run_old_description(const Fake& fake, const Context& c, wideattn_k_from_v desc, size_t size) {
    SentDescriptions sent;
    const long page = sysconf(_SC_PAGESIZE);
    void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(pages != MAP_FAILED);
    REQUIRE(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE) == 0);
    wideattn_prefill_params p = k_from_v_call();
    desc.struct_size = static_cast<uint32_t>(size);
    unsigned char* old = static_cast<unsigned char*>(pages) + page - size;
    std::memcpy(old, &desc, size);
    p.k_from_v = reinterpret_cast<const wideattn_k_from_v*>(old);
    int32_t index = -1;
    CHECK_MESSAGE(wideattn_is_supported(c.ctx, &p, 9, 0, &index) == WIDEATTN_OK, last_error());
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &p, nullptr) == WIDEATTN_OK, last_error());
    sent.once = fake.last_k_from_v();
    CHECK(std::memcmp(&sent.once, old, size) == 0);
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    REQUIRE_MESSAGE(wideattn_plan_run(plan, p.q, nullptr, p.v_cache, p.o, nullptr, nullptr) == WIDEATTN_OK,
                    last_error());
    sent.planned = fake.last_k_from_v();
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    munmap(pages, 2 * page);
    return sent;
}

}  // namespace

TEST_CASE("plan: a C API 0.5.0 caller's 32-byte K-from-V description is read to its end, inv_freq NULL") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    constexpr size_t kOldSize = 32;  // wideattn_k_from_v up to `reserved`
    constexpr uintptr_t kTable = 0x70001000;  // a fake device inv_freq table
    wideattn_prefill_params p = k_from_v_call();
    wideattn_k_from_v desc = test::k_from_v_desc();
    const SentDescriptions sent = run_old_description(fake, c, desc, kOldSize);
    CHECK(sent.once.inv_freq == nullptr);
    CHECK(sent.planned.inv_freq == nullptr);

    // A description of this version passes its inv_freq table to the kernel as it is.
    desc.inv_freq = reinterpret_cast<const float*>(kTable);
    p.k_from_v = &desc;
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &p, nullptr) == WIDEATTN_OK, last_error());
    const wideattn_k_from_v given = fake.last_k_from_v();
    CHECK(std::memcmp(&given, &desc, sizeof given) == 0);
}

TEST_CASE("plan: a C API 0.6.0 caller's 40-byte K-from-V description is read to its end, cos_sin NULL") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    constexpr size_t kOldSize = 40;  // wideattn_k_from_v up to inv_freq
    constexpr uintptr_t kCosSin = 0x70002000;  // a fake device cos / sin table
    constexpr int32_t kCosSinPositions = 16;   // 16 rows of 64 entries: 4 KiB
    wideattn_prefill_params p = k_from_v_call();
    wideattn_k_from_v desc = test::k_from_v_desc();
    const SentDescriptions old = run_old_description(fake, c, desc, kOldSize);
    for (const wideattn_k_from_v& got : {old.once, old.planned}) {
        CHECK(got.cos_sin == nullptr);
        CHECK(got.cos_sin_positions == 0);
    }

    // The 0.7.0 description passes its cos / sin table to the kernel as it is, and a plan keeps it
    // in its copy after the caller's struct changes.
    desc.cos_sin = reinterpret_cast<const void*>(kCosSin);
    desc.cos_sin_positions = kCosSinPositions;
    p.k_from_v = &desc;
    REQUIRE_MESSAGE(wideattn_prefill(c.ctx, &p, nullptr) == WIDEATTN_OK, last_error());
    wideattn_k_from_v sent = fake.last_k_from_v();
    CHECK(std::memcmp(&sent, &desc, sizeof sent) == 0);
    wideattn_plan* plan = nullptr;
    REQUIRE_MESSAGE(wideattn_plan_create(c.ctx, &p, nullptr, &plan) == WIDEATTN_OK, last_error());
    const wideattn_k_from_v created = desc;
    desc.cos_sin = nullptr;
    desc.cos_sin_positions = 0;
    REQUIRE_MESSAGE(wideattn_plan_run(plan, p.q, nullptr, p.v_cache, p.o, nullptr, nullptr) == WIDEATTN_OK,
                    last_error());
    sent = fake.last_k_from_v();
    CHECK(std::memcmp(&sent, &created, sizeof sent) == 0);
    CHECK(sent.cos_sin == reinterpret_cast<const void*>(kCosSin));
    CHECK(sent.cos_sin_positions == kCosSinPositions);
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
}

TEST_CASE("plan: a C API 0.4.0 caller's 264-byte params are read to their end and no further") {
    const Fake fake;
    const Context c;
    if (!c.ok) return;
    constexpr size_t kOldSize = offsetof(wideattn_prefill_params, k_from_v);
    const long page = sysconf(_SC_PAGESIZE);
    // Two pages, the second inaccessible: the old struct ends exactly where the guard page begins.
    void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(pages != MAP_FAILED);
    REQUIRE(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE) == 0);
    wideattn_prefill_params valid = test::valid_params();
    valid.o_dtype = WIDEATTN_DTYPE_F64;
    unsigned char* old = static_cast<unsigned char*>(pages) + page - kOldSize;
    std::memcpy(old, &valid, kOldSize);
    const auto* params = reinterpret_cast<const wideattn_prefill_params*>(old);
    int32_t index = -1;
    CHECK_MESSAGE(wideattn_is_supported(c.ctx, params, 9, 0, &index) == WIDEATTN_OK, last_error());
    CHECK_MESSAGE(wideattn_prefill(c.ctx, params, nullptr) == WIDEATTN_OK, last_error());
    wideattn_plan* plan = nullptr;
    CHECK_MESSAGE(wideattn_plan_create(c.ctx, params, nullptr, &plan) == WIDEATTN_OK, last_error());
    CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
    munmap(pages, 2 * page);
}
