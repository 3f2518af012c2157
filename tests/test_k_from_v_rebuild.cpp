// test_k_from_v_rebuild.cpp - wideattn_k_from_v_rebuild's host side: every bad argument of the
// K-from-V call or of its out struct refused by name and value (validate_k_from_v_rebuild and the
// exported function, which validates before the driver is loaded), the versioned out struct, the
// selection and grid of the rebuild kernel over the built bundle's manifest, and 20,000 random
// out structs with extreme values: refused with a message, or every address the kernel forms
// within 2^63 bytes of its base and below the end of the address space (128-bit oracle).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dispatch/manifest.h"
#include "dispatch/selection.h"
#include "dispatch/validation.h"
#include "kernels/k_from_v_rebuild/traits.h"
#include "tests/test_helpers.h"

using namespace wideattn;

namespace {

// Fake device addresses of the out caches and table, apart from test::valid_params' tensors.
constexpr uintptr_t kOutK = 0x80000000, kOutV = 0xa0000000, kOutTable = 0xc0000000;
constexpr int32_t kOutPages = 64;  // pages a sequence in the out caches

// A valid rebuild: test::k_from_v_params (2 sequences, 4 KV heads, page 16, bf16 V) and a dense
// out of kOutPages pages a sequence.
struct RebuildCall {
    wideattn_prefill_params params = test::k_from_v_params();
    wideattn_k_from_v_rebuild_out out{};
    RebuildCall() {
        const int64_t d = params.head_dim, slot = int64_t{params.num_kv_heads} * d;
        out.struct_size = sizeof(out);
        out.k_cache = reinterpret_cast<void*>(kOutK);
        out.v_cache = reinterpret_cast<void*>(kOutV);
        out.k_head_stride = out.v_head_stride = d;
        out.k_slot_stride = out.v_slot_stride = slot;
        out.k_block_stride = out.v_block_stride = slot * params.block_size;
        out.block_table = reinterpret_cast<const int32_t*>(kOutTable);
        out.block_table_stride = kOutPages;
        out.num_blocks = params.num_seqs * kOutPages;
    }
};

std::string refusal(const RebuildCall& call) {
    std::string message;
    wideattn_k_from_v_rebuild_out copy{};
    const wideattn_status status = validate_k_from_v_rebuild(&call.params, &call.out, &copy, &message);
    if (status == WIDEATTN_ERROR_INVALID_ARGUMENT) return message;
    return std::string("<not refused as INVALID_ARGUMENT: ") + wideattn_status_string(status) + "> " + message;
}

struct BadRebuild {
    const char* label;
    std::function<void(RebuildCall&)> mutate;
    const char* expected;
};

}  // namespace

TEST_CASE("k_from_v_rebuild: the baseline call is valid, and out is read as a versioned struct") {
    RebuildCall call;
    std::string message;
    wideattn_k_from_v_rebuild_out copy{};
    CHECK_MESSAGE(validate_k_from_v_rebuild(&call.params, &call.out, &copy, &message) == WIDEATTN_OK, message);
    CHECK(copy.k_cache == call.out.k_cache);
    CHECK(copy.num_blocks == call.out.num_blocks);
    call.params.kv_dtype = WIDEATTN_DTYPE_E4M3;  // an e4m3 V-only cache takes v_scale
    call.params.v_scale = reinterpret_cast<const float*>(uintptr_t{0x50003000});
    call.params.v_slot_stride = call.params.num_kv_heads * int64_t{call.params.head_dim};
    CHECK_MESSAGE(validate_k_from_v_rebuild(&call.params, &call.out, &copy, &message) == WIDEATTN_OK, message);
    // A larger struct of a newer header with zero bytes past this library's is accepted.
    struct Larger {
        wideattn_k_from_v_rebuild_out out;
        uint64_t newer_field;
    } larger{call.out, 0};
    larger.out.struct_size = sizeof(Larger);
    CHECK_MESSAGE(validate_k_from_v_rebuild(&call.params, &larger.out, &copy, &message) == WIDEATTN_OK, message);
    larger.newer_field = 1;
    CHECK(validate_k_from_v_rebuild(&call.params, &larger.out, &copy, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.find("wideattn_k_from_v_rebuild_out.struct_size=104") != std::string::npos);
}

TEST_CASE("k_from_v_rebuild: each bad argument is refused with its own message") {
    const std::vector<BadRebuild> cases = {
        {"params NULL", [](RebuildCall&) {}, nullptr},
        {"not a K-from-V call",
         [](RebuildCall& c) {
             c.params.flags = 0;
             c.params.k_cache = reinterpret_cast<const void*>(uintptr_t{0x20000000});
         },
         "params.flags=0 lacks WIDEATTN_FLAG_K_FROM_V"},
        {"params invalid as a call", [](RebuildCall& c) { c.params.softmax_scale = -1.0f; }, "softmax_scale=-1"},
        {"transposed V",
         [](RebuildCall& c) {
             c.params.kv_dtype = WIDEATTN_DTYPE_E4M3;
             c.params.v_scale = reinterpret_cast<const float*>(uintptr_t{0x50003000});
             c.params.flags |= WIDEATTN_FLAG_V_TRANSPOSED;
             c.params.v_slot_stride = 1;
             c.params.v_head_stride = int64_t{c.params.head_dim} * c.params.block_size;
             c.params.v_block_stride = c.params.v_head_stride * c.params.num_kv_heads;
         },
         "has WIDEATTN_FLAG_V_TRANSPOSED"},
        {"out NULL", [](RebuildCall&) {}, "out is NULL"},
        {"struct_size 0", [](RebuildCall& c) { c.out.struct_size = 0; },
         "wideattn_k_from_v_rebuild_out.struct_size=0 is below 96"},
        {"reserved", [](RebuildCall& c) { c.out.reserved = 3; }, "out.reserved=3 must be 0"},
        {"reserved2", [](RebuildCall& c) { c.out.reserved2 = -1; }, "out.reserved2=-1 must be 0"},
        {"k_cache NULL", [](RebuildCall& c) { c.out.k_cache = nullptr; }, "out.k_cache is NULL"},
        {"v_cache NULL", [](RebuildCall& c) { c.out.v_cache = nullptr; }, "out.v_cache is NULL"},
        {"block_table NULL", [](RebuildCall& c) { c.out.block_table = nullptr; }, "out.block_table is NULL"},
        {"k_cache misaligned", [](RebuildCall& c) { c.out.k_cache = reinterpret_cast<void*>(kOutK + 8); },
         "out.k_cache=0x80000008 is not 16-byte aligned"},
        {"v_cache misaligned", [](RebuildCall& c) { c.out.v_cache = reinterpret_cast<void*>(kOutV + 2); },
         "out.v_cache=0xa0000002 is not 16-byte aligned"},
        {"block_table misaligned",
         [](RebuildCall& c) { c.out.block_table = reinterpret_cast<const int32_t*>(kOutTable + 2); },
         "out.block_table=0xc0000002 is not 4-byte aligned"},
        {"num_blocks 0", [](RebuildCall& c) { c.out.num_blocks = 0; }, "out.num_blocks=0 must be >= 1"},
        {"block_table_stride 0", [](RebuildCall& c) { c.out.block_table_stride = 0; },
         "out.block_table_stride=0 must be >= 1"},
        {"k_slot_stride not a multiple of 8", [](RebuildCall& c) { c.out.k_slot_stride = 2052; },
         "out.k_slot_stride=2052 is not a multiple of 8 elements"},
        {"v_head_stride 0", [](RebuildCall& c) { c.out.v_head_stride = 0; }, "out.v_head_stride=0 must be >= 1"},
        {"k rows overlap", [](RebuildCall& c) { c.out.k_slot_stride = 512; }, "out.k_slot_stride=512 is smaller than"},
        {"v rows overlap", [](RebuildCall& c) { c.out.v_head_stride = 256; }, "out.v_head_stride=256 is smaller than"},
        {"k_cache past the address space",
         [](RebuildCall& c) { c.out.k_cache = reinterpret_cast<void*>(~uintptr_t{0xffff}); }, "out.k_cache"},
        {"block_table past the address space",
         [](RebuildCall& c) { c.out.block_table = reinterpret_cast<const int32_t*>(~uintptr_t{0xff}); },
         "out.block_table=0xffffffffffffff00 plus the 508 bytes to its last element runs past the end"},
        {"block_table stride overflows",
         [](RebuildCall& c) { c.out.block_table_stride = int64_t{1} << 62; },
         "out.block_table_stride=4611686018427387904 with num_seqs=2 puts the last element of out.block_table"},
        {"k_cache overlaps v_cache", [](RebuildCall& c) { c.out.v_cache = c.out.k_cache; },
         "out.k_cache (bytes 0x80000000.."},
        {"v_cache overlaps the V-only cache", [](RebuildCall& c) { c.out.v_cache = const_cast<void*>(c.params.v_cache); },
         "out.v_cache (bytes 0x30000000.."},
        {"k_cache overlaps k_norm_scale",
         [](RebuildCall& c) { c.out.k_cache = reinterpret_cast<void*>(test::kFakeKNormScale - 0x100000); },
         "overlaps k_from_v.k_norm_scale"},
        {"k_cache overlaps out.block_table", [](RebuildCall& c) { c.out.k_cache = reinterpret_cast<void*>(kOutTable); },
         "overlaps out.block_table"},
        {"k_cache overlaps o", [](RebuildCall& c) { c.out.k_cache = c.params.o; }, "overlaps o"},
    };
    for (const BadRebuild& bad : cases) {
        RebuildCall call;
        bad.mutate(call);
        const std::string label = bad.label;
        CAPTURE(label);
        std::string message;
        wideattn_k_from_v_rebuild_out copy{};
        if (label == "params NULL") {
            CHECK(validate_k_from_v_rebuild(nullptr, &call.out, &copy, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
            CHECK(message == "params is NULL");
            continue;
        }
        if (label == "out NULL") {
            CHECK(validate_k_from_v_rebuild(&call.params, nullptr, &copy, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
            CHECK(message == bad.expected);
            continue;
        }
        const std::string got = refusal(call);
        CHECK_MESSAGE(got.find(bad.expected) != std::string::npos, got);
    }
}

TEST_CASE("k_from_v_rebuild: the exported function validates before the driver, and refuses a NULL ctx") {
    RebuildCall call;
    CHECK(wideattn_k_from_v_rebuild(nullptr, &call.params, &call.out, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "ctx is NULL");
    wideattn_context* ctx = nullptr;
    REQUIRE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK);
    call.out.num_blocks = -2;
    CHECK(wideattn_k_from_v_rebuild(ctx, &call.params, &call.out, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "out.num_blocks=-2 must be >= 1");
    wideattn_close(ctx);
}

TEST_CASE("k_from_v_rebuild: selection and grid over the built bundle") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    const RebuildCall call;
    bool any = false;
    for (const ManifestKernel& k : m.kernels) {
        if (k.name != "k_from_v_rebuild") continue;
        any = true;
        int32_t major = 0, minor = 0;
        bool specific = false;
        REQUIRE(parse_arch(k.arch, &major, &minor, &specific));
        int32_t index = -1;
        std::string why;
        REQUIRE_MESSAGE(select_k_from_v_rebuild_kernel(m.kernels, call.params, major, minor, &index, &why) == WIDEATTN_OK,
                        why);
        CHECK(m.kernels[static_cast<size_t>(index)].kind == kKindKFromVRebuild);
        // 2 sequences x min(1024, 64) pages (both tables' rows).
        LaunchGeometry g = k_from_v_rebuild_launch_geometry(k, call.params, call.out);
        CHECK(g.grid_x == 2u * kOutPages);
        CHECK(g.grid_y == 1u);  // every KV head of a page in its block
        CHECK(g.block_x == static_cast<uint32_t>(KFromVRebuildTraits::kThreads));
        // Many pairs: grid.x capped, the kernel walks the rest.
        wideattn_k_from_v_rebuild_out wide = call.out;
        wide.block_table_stride = 1 << 20;
        wideattn_prefill_params wide_params = call.params;
        wide_params.block_table_stride = 1 << 20;
        g = k_from_v_rebuild_launch_geometry(k, wide_params, wide);
        CHECK(g.grid_x == static_cast<uint32_t>(KFromVRebuildTraits::kMaxGridX));
        // A head dim the kernel does not serve.
        wideattn_prefill_params other = call.params;
        other.head_dim = 256;
        CHECK(select_k_from_v_rebuild_kernel(m.kernels, other, major, minor, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
        CHECK(why.find("serves head_dim 512..512, not head_dim=256") != std::string::npos);
    }
    CHECK_MESSAGE(any, "the built bundle has no k_from_v_rebuild kernel");
    int32_t index = -1;
    std::string why;
    CHECK(select_k_from_v_rebuild_kernel(m.kernels, call.params, 7, 5, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.rfind("no K-from-V rebuild kernel in the bundle for sm_75", 0) == 0);
}

namespace {

using i128 = __int128;

// The out struct's fields, for mutation.
struct OutField {
    const char* name;
    bool pointer;
    size_t offset, size;
};
#define OUT_FIELD(pointer, name) \
    OutField { #name, pointer, offsetof(wideattn_k_from_v_rebuild_out, name), sizeof(wideattn_k_from_v_rebuild_out::name) }
const OutField kOutFields[] = {OUT_FIELD(true, k_cache),          OUT_FIELD(false, k_block_stride),
                               OUT_FIELD(false, k_slot_stride),   OUT_FIELD(false, k_head_stride),
                               OUT_FIELD(true, v_cache),          OUT_FIELD(false, v_block_stride),
                               OUT_FIELD(false, v_slot_stride),   OUT_FIELD(false, v_head_stride),
                               OUT_FIELD(true, block_table),      OUT_FIELD(false, block_table_stride),
                               OUT_FIELD(false, num_blocks),      OUT_FIELD(false, reserved),
                               OUT_FIELD(false, reserved2)};
#undef OUT_FIELD

// Where the kernel's addresses of one out cache end, in 128-bit arithmetic: every (block, slot,
// head) row's last element below 2^63 bytes from the base and below the end of the address space.
bool cache_addresses_fit(uintptr_t base, int64_t block_stride, int64_t slot_stride, int64_t head_stride,
                         const wideattn_prefill_params& p, int32_t num_blocks) {
    const i128 last = (i128{num_blocks} - 1) * block_stride + (i128{p.block_size} - 1) * slot_stride +
                      (i128{p.num_kv_heads} - 1) * head_stride + p.head_dim - 1;
    const i128 bytes = last * 2 + 1;
    return bytes < (i128{1} << 63) && i128{base} + bytes <= i128{UINTPTR_MAX};
}

}  // namespace

TEST_CASE("k_from_v_rebuild: random out structs with extreme values: refused by name, or every address fits") {
    std::mt19937_64 rng(20261204);
    const int64_t extremes[] = {0,         1,         -1,        8,         16,        512,      2048,
                                1 << 20,   INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int64_t{1} << 40,
                                int64_t{1} << 62,     -8,        kOutPages, 2 * kOutPages};
    int accepted = 0, refused = 0;
    for (int sample = 0; sample < 20000; ++sample) {
        RebuildCall call;
        const int writes = 1 + static_cast<int>(rng() % 3);
        std::string written;
        for (int w = 0; w < writes; ++w) {
            const OutField& f = kOutFields[rng() % (sizeof kOutFields / sizeof kOutFields[0])];
            int64_t value = extremes[rng() % (sizeof extremes / sizeof extremes[0])];
            if (f.pointer) value = static_cast<int64_t>(rng() % 4 == 0 ? ~uint64_t{0} - (rng() % 4096) : rng() & ~uint64_t{0xf});
            std::memcpy(reinterpret_cast<unsigned char*>(&call.out) + f.offset, &value, f.size);
            written += std::string(f.name) + " ";
        }
        CAPTURE(written);
        std::string message;
        wideattn_k_from_v_rebuild_out copy{};
        const wideattn_status status = validate_k_from_v_rebuild(&call.params, &call.out, &copy, &message);
        if (status != WIDEATTN_OK) {
            ++refused;
            CHECK(status == WIDEATTN_ERROR_INVALID_ARGUMENT);
            CHECK(!message.empty());
            continue;
        }
        ++accepted;
        const wideattn_k_from_v_rebuild_out& o = copy;
        CHECK(o.num_blocks >= 1);
        CHECK(o.block_table_stride >= 1);
        CHECK(reinterpret_cast<uintptr_t>(o.k_cache) % 16 == 0);
        CHECK(reinterpret_cast<uintptr_t>(o.v_cache) % 16 == 0);
        CHECK(cache_addresses_fit(reinterpret_cast<uintptr_t>(o.k_cache), o.k_block_stride, o.k_slot_stride,
                                  o.k_head_stride, call.params, o.num_blocks));
        CHECK(cache_addresses_fit(reinterpret_cast<uintptr_t>(o.v_cache), o.v_block_stride, o.v_slot_stride,
                                  o.v_head_stride, call.params, o.num_blocks));
        // The last table entry the kernel reads: row num_seqs - 1, entry min(both rows' widths) - 1.
        const i128 last_entry = (i128{call.params.num_seqs} - 1) * o.block_table_stride +
                                std::min<int64_t>(call.params.block_table_stride, o.block_table_stride) - 1;
        CHECK(i128{reinterpret_cast<uintptr_t>(o.block_table)} + last_entry * 4 + 3 <= i128{UINTPTR_MAX});
    }
    MESSAGE(accepted << " accepted, " << refused << " refused");
    CHECK(accepted > 0);
    CHECK(refused > 0);
}
