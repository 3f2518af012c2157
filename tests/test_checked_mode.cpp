// test_checked_mode.cpp - checked mode end to end through the stand-in driver
// (tests/fake_driver/fake_libcuda.cpp, whose cuMemcpyDtoHAsync copies from host arrays passed as
// device pointers): a good call copies, checks and launches; each broken rule is refused with its
// message and launches nothing while the context keeps working; WIDEATTN_CHECK_METADATA=1 checks
// every call of a context; bad flag bits, a capturing stream and a failed copy are refused before
// any launch; a block table longer than the host staging buffer is checked in pieces.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/metadata_check.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

constexpr int32_t kTableStride = 16;
constexpr int32_t kNumBlocks = 2048;  // test::valid_params
constexpr int32_t kPage = 16;

// The fake driver's checked-mode counters and switches, read through the library libwideattn loaded.
class FakeCopies {
public:
    FakeCopies() {
        const char* path = std::getenv("WIDEATTN_LIBCUDA");
        REQUIRE(path);
        handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle_, dlerror());
        copies_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_cuda_device_copies"));
        syncs_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_cuda_synchronizations"));
        take_launches_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_cuda_take_launches"));
        set_capturing_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "fake_cuda_set_capturing"));
        set_failure_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "fake_cuda_set_copies_until_failure"));
        REQUIRE((copies_ && syncs_ && take_launches_ && set_capturing_ && set_failure_));
        take_launches_();
    }
    ~FakeCopies() {
        set_capturing_(0);
        set_failure_(-1);
        dlclose(handle_);
    }
    FakeCopies(const FakeCopies&) = delete;
    FakeCopies& operator=(const FakeCopies&) = delete;
    int copies() const { return copies_(); }
    int syncs() const { return syncs_(); }
    std::string take_launches() const { return take_launches_(); }
    void set_capturing(bool on) const { set_capturing_(on ? 1 : 0); }
    void fail_copy_after(int successes) const { set_failure_(successes); }

private:
    void* handle_ = nullptr;
    int (*copies_)() = nullptr;
    int (*syncs_)() = nullptr;
    const char* (*take_launches_)() = nullptr;
    void (*set_capturing_)(int) = nullptr;
    void (*set_failure_)(int) = nullptr;
};

// The built bundle opened (with the environment as it is at construction).
class Context {
public:
    Context() { REQUIRE_MESSAGE(wideattn_open(&ctx_, test::built_bundle().c_str()) == WIDEATTN_OK, wideattn_last_error()); }
    ~Context() { wideattn_close(ctx_); }
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    wideattn_context* get() const { return ctx_; }

private:
    wideattn_context* ctx_ = nullptr;
};

// A bf16 call of two sequences (q_len 40 and 60 over 64 and 160 keys) whose metadata lives in
// host arrays, with the fake driver's device pointers pointing at them.
struct HostCall {
    std::vector<int32_t> cu_seqlens_q{0, 40, 100};
    std::vector<int32_t> seq_lens_k{64, 160};
    std::vector<int32_t> block_table = std::vector<int32_t>(2 * kTableStride, -7);  // unused entries: garbage
    wideattn_prefill_params p = test::valid_params();

    HostCall() {
        for (int32_t s = 0; s < 2; ++s)
            for (int32_t j = 0; j * kPage < seq_lens_k[s]; ++j) block_table[s * kTableStride + j] = 100 * s + j;
        p.block_table_stride = kTableStride;
        p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    }
    // The params pointing at the arrays as they are now.
    const wideattn_prefill_params* params() {
        p.cu_seqlens_q = cu_seqlens_q.data();
        p.seq_lens_k = seq_lens_k.data();
        p.block_table = block_table.data();
        return &p;
    }
};

std::string last_error() { return wideattn_last_error(); }

}  // namespace

TEST_CASE("checked mode: a good call copies the metadata, waits for the stream, checks it and launches") {
    const FakeCopies fake;
    const Context ctx;
    HostCall call;
    const int copies = fake.copies(), syncs = fake.syncs();
    REQUIRE_MESSAGE(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK(fake.copies() == copies + 4);  // cu_seqlens_q, seq_lens_k, one used prefix per row
    CHECK(fake.syncs() == syncs + 2);    // after the lengths, after the rows
    CHECK_FALSE(fake.take_launches().empty());
    // Without the flag nothing is copied: bad metadata is the kernels' to clamp.
    call.p.flags = 0;
    call.block_table[0] = -1;
    REQUIRE_MESSAGE(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK(fake.copies() == copies + 4);
    CHECK_FALSE(fake.take_launches().empty());
}

TEST_CASE("checked mode: each broken rule is refused with its message, launching nothing") {
    const FakeCopies fake;
    const Context ctx;
    HostCall call;
    std::string expected;
    SUBCASE("cu_seqlens_q[0]") {
        call.cu_seqlens_q[0] = 2;
        expected = "cu_seqlens_q[0] = 2 is not 0 (the first sequence starts at query row 0; checked mode)";
    }
    SUBCASE("cu_seqlens_q decreasing") {
        call.cu_seqlens_q = {0, 70, 50};
        expected = "cu_seqlens_q[2] = 50 is below cu_seqlens_q[1] = 70 (must be non-decreasing; checked mode)";
    }
    SUBCASE("cu_seqlens_q past total_q") {
        call.cu_seqlens_q[1] = 101;
        expected = "cu_seqlens_q[1] = 101 is above total_q = 100 (no sequence ends past the last query row; "
                   "checked mode)";
    }
    SUBCASE("cu_seqlens_q[num_seqs]") {
        call.cu_seqlens_q[2] = 99;
        expected = "cu_seqlens_q[2] = 99 is not total_q = 100 (cu_seqlens_q[num_seqs] must equal total_q; "
                   "checked mode)";
    }
    SUBCASE("seq_lens_k below q_len") {
        call.seq_lens_k[1] = 59;
        expected = "seq_lens_k[1] = 59 is below q_len = 60 of sequence 1 (cu_seqlens_q[2] - cu_seqlens_q[1]; its "
                   "keys include its new tokens; checked mode)";
    }
    SUBCASE("seq_lens_k past the table row") {
        call.seq_lens_k[0] = kTableStride * kPage + 1;
        expected = "seq_lens_k[0] = 257 is above block_table_stride * block_size = 256 (the keys one block_table row "
                   "addresses; checked mode)";
    }
    SUBCASE("block_table entry negative") {
        call.block_table[1 * kTableStride + 5] = -1;
        expected = "block_table[1][5] = -1 (sequence 1, key block 5) is outside [0, num_blocks = 2048) (checked mode)";
    }
    SUBCASE("block_table entry num_blocks") {
        call.block_table[0 * kTableStride + 3] = kNumBlocks;
        expected = "block_table[0][3] = 2048 (sequence 0, key block 3) is outside [0, num_blocks = 2048) "
                   "(checked mode)";
    }
    CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == expected);
    CHECK(fake.take_launches().empty());
    // The context keeps working: the repaired call launches.
    HostCall good;
    REQUIRE_MESSAGE(wideattn_prefill(ctx.get(), good.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK_FALSE(fake.take_launches().empty());
}

TEST_CASE("checked mode: WIDEATTN_CHECK_METADATA=1 checks every call of the contexts opened with it") {
    const FakeCopies fake;
    HostCall call;
    call.p.flags = 0;
    call.block_table[kTableStride + 9] = kNumBlocks + 1;  // sequence 1's last used block
    const std::string expected =
        "block_table[1][9] = 2049 (sequence 1, key block 9) is outside [0, num_blocks = 2048) (checked mode)";
    {
        const test::ScopedEnv env(kCheckMetadataEnv, "1");
        const Context checked;
        CHECK(wideattn_prefill(checked.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(last_error() == expected);
        CHECK(fake.take_launches().empty());
    }
    // Read at open: a context opened without it trusts the metadata, as does one opened with "0".
    const Context unchecked;
    CHECK_MESSAGE(wideattn_prefill(unchecked.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK_FALSE(fake.take_launches().empty());
    const test::ScopedEnv env(kCheckMetadataEnv, "0");
    const Context off;
    CHECK_MESSAGE(wideattn_prefill(off.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK_FALSE(fake.take_launches().empty());
    // The flag still asks for the check on such a context.
    call.p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    CHECK(wideattn_prefill(off.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == expected);
}

TEST_CASE("checked mode: bad flag bits are refused before any copy or launch") {
    const FakeCopies fake;
    const Context ctx;
    HostCall call;
    const int copies = fake.copies();
    call.p.flags = WIDEATTN_FLAG_CHECK_METADATA | 8;
    CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() ==
          "flags=9 has unknown bits 0x8 (the flags are WIDEATTN_FLAG_CHECK_METADATA = 1, "
          "WIDEATTN_FLAG_V_TRANSPOSED = 2 and WIDEATTN_FLAG_K_FROM_V = 4)");
    CHECK(fake.copies() == copies);
    CHECK(fake.take_launches().empty());
}

TEST_CASE("checked mode: a capturing stream is refused before any copy") {
    const FakeCopies fake;
    const Context ctx;
    HostCall call;
    const int copies = fake.copies(), syncs = fake.syncs();
    fake.set_capturing(true);
    CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("stream=") == 0);
    CHECK(last_error().find(" is capturing a CUDA graph: checked mode (WIDEATTN_FLAG_CHECK_METADATA or "
                            "WIDEATTN_CHECK_METADATA=1) copies the metadata to the host and waits for the stream") !=
          std::string::npos);
    CHECK(fake.copies() == copies);
    CHECK(fake.syncs() == syncs);
    CHECK(fake.take_launches().empty());
    // Outside checked mode the same call is capturable and launches.
    call.p.flags = 0;
    CHECK_MESSAGE(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK_FALSE(fake.take_launches().empty());
}

TEST_CASE("checked mode: a failed copy returns the driver's error, naming the copy") {
    const FakeCopies fake;
    const Context ctx;
    HostCall call;
    SUBCASE("the lengths") {
        fake.fail_copy_after(0);
        CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_CUDA);
        CHECK(last_error() == "cuMemcpyDtoHAsync(cu_seqlens_q, 12 bytes) failed in checked mode: "
                              "CUDA_ERROR_INVALID_VALUE (fake driver)");
    }
    SUBCASE("a block_table row") {
        fake.fail_copy_after(3);  // cu_seqlens_q, seq_lens_k, row 0, then row 1 fails
        CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_CUDA);
        CHECK(last_error() == "cuMemcpyDtoHAsync(block_table, 40 bytes) failed in checked mode: "
                              "CUDA_ERROR_INVALID_VALUE (fake driver)");
    }
    CHECK(fake.take_launches().empty());
    CHECK_MESSAGE(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK_FALSE(fake.take_launches().empty());
}

TEST_CASE("checked mode: a block table longer than the staging buffer is copied and checked in pieces") {
    const FakeCopies fake;
    const Context ctx;
    // One sequence of 1.5 x kMetadataStagingEntries pages (one query row).
    const int64_t pages = kMetadataStagingEntries + kMetadataStagingEntries / 2;
    HostCall call;
    call.p.num_seqs = 1;
    call.p.total_q = 1;
    call.p.block_table_stride = pages;
    call.cu_seqlens_q = {0, 1};
    call.seq_lens_k = {static_cast<int32_t>(pages * kPage)};
    call.block_table.assign(static_cast<size_t>(pages), 0);
    int copies = fake.copies(), syncs = fake.syncs();
    REQUIRE_MESSAGE(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_OK, last_error());
    CHECK(fake.copies() == copies + 4);  // the lengths, then the row in two pieces
    CHECK(fake.syncs() == syncs + 3);    // after the lengths, after each piece
    CHECK_FALSE(fake.take_launches().empty());
    const int64_t bad = kMetadataStagingEntries + 7;  // in the second piece
    call.block_table[static_cast<size_t>(bad)] = -3;
    CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error() == "block_table[0][" + std::to_string(bad) + "] = -3 (sequence 0, key block " +
                              std::to_string(bad) + ") is outside [0, num_blocks = 2048) (checked mode)");
    CHECK(fake.take_launches().empty());
    // A bad entry in the first piece is found before the second is copied.
    call.block_table[static_cast<size_t>(bad)] = 0;
    call.block_table[5] = kNumBlocks;
    copies = fake.copies();
    CHECK(wideattn_prefill(ctx.get(), call.params(), nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("block_table[0][5] = 2048") == 0);
    CHECK(fake.copies() == copies + 3);
}
