// test_validation_property.cpp - randomized property test of the C API's argument validation:
// with fixed seeds, thousands of random valid prefill, quantise and scale descriptions, and as
// many mutated ones with extreme values (0, negative, INT32/INT64 limits, strides near 2^k,
// pointers at the top of the address space). Every call returns OK or an error naming a field
// (and, for an integer field, its value); an accepted call is checked against an independent
// oracle in 128-bit arithmetic (every tensor's last byte within 2^63 of its base and below the
// end of the address space, output rows disjoint, tensor maps describable); valid params stay
// valid; and random K-from-V descriptions (WIDEATTN_FLAG_K_FROM_V) with extreme values, accepted
// exactly when the test's own rules accept them. Built with -Db_sanitize=address,undefined, the same
// runs check for undefined behaviour.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dispatch/kv_tensor_maps.h"
#include "dispatch/manifest.h"
#include "dispatch/selection.h"
#include "dispatch/validation.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

using i128 = __int128;
constexpr i128 kMaxOffset = INT64_MAX;          // validation keeps byte offsets within int64
constexpr i128 kTmaStrideLimit = i128{1} << 40;  // cuTensorMapEncodeTiled's stride limit
constexpr int kSamplesPerSeed = 3000;
constexpr uint64_t kSeeds[] = {1, 20261201, 0x5eed5eed5eedull};
constexpr size_t kBruteForceRows = 512;  // output overlap checked pair by pair up to this many rows

// One field of a params struct, for mutation and for checking the message that names it.
struct Field {
    const char* name;
    enum Kind { kInt32, kInt64, kPointer, kFloat } kind;
    size_t offset;
};

#define WIDEATTN_FIELD(type, kind, name) Field{#name, Field::kind, offsetof(type, name)}
#define PREFILL_FIELD(kind, name) WIDEATTN_FIELD(wideattn_prefill_params, kind, name)
const Field kPrefillFields[] = {
    PREFILL_FIELD(kPointer, q), PREFILL_FIELD(kInt64, q_token_stride), PREFILL_FIELD(kInt64, q_head_stride),
    PREFILL_FIELD(kPointer, k_cache), PREFILL_FIELD(kInt64, k_block_stride), PREFILL_FIELD(kInt64, k_slot_stride),
    PREFILL_FIELD(kInt64, k_head_stride), PREFILL_FIELD(kPointer, v_cache), PREFILL_FIELD(kInt64, v_block_stride),
    PREFILL_FIELD(kInt64, v_slot_stride), PREFILL_FIELD(kInt64, v_head_stride), PREFILL_FIELD(kPointer, o),
    PREFILL_FIELD(kInt64, o_token_stride), PREFILL_FIELD(kInt64, o_head_stride), PREFILL_FIELD(kPointer, lse),
    PREFILL_FIELD(kInt64, lse_head_stride), PREFILL_FIELD(kPointer, cu_seqlens_q),
    PREFILL_FIELD(kPointer, seq_lens_k), PREFILL_FIELD(kPointer, block_table),
    PREFILL_FIELD(kInt64, block_table_stride), PREFILL_FIELD(kPointer, q_scale), PREFILL_FIELD(kPointer, k_scale),
    PREFILL_FIELD(kPointer, v_scale), PREFILL_FIELD(kInt32, num_seqs), PREFILL_FIELD(kInt32, total_q),
    PREFILL_FIELD(kInt32, num_q_heads), PREFILL_FIELD(kInt32, num_kv_heads), PREFILL_FIELD(kInt32, head_dim),
    PREFILL_FIELD(kInt32, block_size), PREFILL_FIELD(kInt32, num_blocks), PREFILL_FIELD(kInt32, q_dtype),
    PREFILL_FIELD(kInt32, kv_dtype), PREFILL_FIELD(kInt32, o_dtype), PREFILL_FIELD(kFloat, softmax_scale),
    PREFILL_FIELD(kInt32, flags),
};
#define QUANTIZE_FIELD(kind, name) WIDEATTN_FIELD(wideattn_quantize_params, kind, name)
const Field kQuantizeFields[] = {
    QUANTIZE_FIELD(kPointer, src), QUANTIZE_FIELD(kInt64, src_token_stride), QUANTIZE_FIELD(kInt64, src_head_stride),
    QUANTIZE_FIELD(kPointer, cache), QUANTIZE_FIELD(kInt64, cache_block_stride),
    QUANTIZE_FIELD(kInt64, cache_slot_stride), QUANTIZE_FIELD(kInt64, cache_head_stride),
    QUANTIZE_FIELD(kPointer, slot_mapping), QUANTIZE_FIELD(kPointer, scale), QUANTIZE_FIELD(kPointer, nonfinite_count),
    QUANTIZE_FIELD(kInt32, tokens), QUANTIZE_FIELD(kInt32, heads), QUANTIZE_FIELD(kInt32, head_dim),
    QUANTIZE_FIELD(kInt32, block_size), QUANTIZE_FIELD(kInt32, num_blocks), QUANTIZE_FIELD(kInt32, src_dtype),
};
#define SCALE_FIELD(kind, name) WIDEATTN_FIELD(wideattn_scale_params, kind, name)
const Field kScaleFields[] = {
    SCALE_FIELD(kPointer, src), SCALE_FIELD(kInt64, src_token_stride), SCALE_FIELD(kInt64, src_head_stride),
    SCALE_FIELD(kPointer, slot_mapping), SCALE_FIELD(kPointer, scale), SCALE_FIELD(kPointer, nonfinite_count),
    SCALE_FIELD(kInt32, tokens), SCALE_FIELD(kInt32, heads), SCALE_FIELD(kInt32, head_dim),
    SCALE_FIELD(kInt32, src_dtype),
};
#undef PREFILL_FIELD
#undef QUANTIZE_FIELD
#undef SCALE_FIELD
#undef WIDEATTN_FIELD

class Random {
public:
    explicit Random(uint64_t seed) : engine_(seed) {}
    int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }
    template <typename T, size_t N>
    T pick(const T (&values)[N]) {
        return values[static_cast<size_t>(in(0, N - 1))];
    }
    bool chance(int percent) { return in(0, 99) < percent; }
    uint64_t bits() { return engine_(); }

private:
    std::mt19937_64 engine_;
};

// A 256-byte aligned fake device address in its own 2^36-byte window (never dereferenced).
void* address(int window, Random& rng) {
    return reinterpret_cast<void*>((uintptr_t{1} << 40) + (uintptr_t(window) << 36) +
                                         (static_cast<uintptr_t>(rng.in(0, 1 << 20)) << 8));
}

// A padded stride: at least `covers` elements, a multiple of `multiple`.
int64_t padded(int64_t covers, int64_t multiple, Random& rng) {
    const int64_t pad = rng.chance(50) ? 0 : rng.in(1, 4) * multiple;
    return (covers + multiple - 1) / multiple * multiple + pad;
}

int64_t element_multiple(int32_t dtype) { return 16 / dtype_size(dtype); }

// Random valid prefill params: token- or head-major Q and O, nested (possibly padded or
// interleaved) K/V strides, e4m3 scales where the dtypes need them, an optional LSE.
wideattn_prefill_params random_prefill(Random& rng) {
    const int32_t q_dtypes[] = {WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_F16, WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_F32};
    const int32_t o_dtypes[] = {WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_F32, WIDEATTN_DTYPE_F64};
    const int32_t head_dims[] = {64, 128, 256, 512};
    const int32_t powers[] = {1, 2, 4, 8};
    wideattn_prefill_params p{};
    p.q_dtype = rng.pick(q_dtypes);
    p.kv_dtype = rng.pick(q_dtypes);
    p.o_dtype = rng.pick(o_dtypes);
    p.head_dim = rng.pick(head_dims);
    p.num_kv_heads = rng.pick(powers);
    p.num_q_heads = p.num_kv_heads * rng.pick(powers);
    p.block_size = static_cast<int32_t>(16 * rng.in(1, 8));
    p.num_blocks = static_cast<int32_t>(rng.in(1, 4096));
    p.num_seqs = static_cast<int32_t>(rng.in(1, 64));
    p.total_q = static_cast<int32_t>(rng.in(0, 5000));
    p.softmax_scale = static_cast<float>(rng.in(1, 1000)) / 256.0f;
    const int64_t qm = element_multiple(p.q_dtype), km = element_multiple(p.kv_dtype), om = element_multiple(p.o_dtype);
    p.q = address(0, rng);
    p.q_head_stride = padded(p.head_dim, qm, rng);
    p.q_token_stride = padded(p.q_head_stride * p.num_q_heads, qm, rng);
    p.k_cache = address(1, rng);
    p.v_cache = address(2, rng);
    for (int64_t* s : {&p.k_head_stride, &p.v_head_stride}) *s = padded(p.head_dim, km, rng);
    p.k_slot_stride = padded(p.k_head_stride * p.num_kv_heads, km, rng);
    p.v_slot_stride = padded(p.v_head_stride * p.num_kv_heads, km, rng);
    p.k_block_stride = padded(p.k_slot_stride * p.block_size, km, rng);
    p.v_block_stride = padded(p.v_slot_stride * p.block_size, km, rng);
    p.o = address(3, rng);
    if (rng.chance(50)) {  // o[token][head][d]
        p.o_head_stride = padded(p.head_dim, om, rng);
        p.o_token_stride = padded(p.o_head_stride * p.num_q_heads, om, rng);
    } else {  // o[head][token][d]
        p.o_token_stride = padded(p.head_dim, om, rng);
        p.o_head_stride = padded(p.o_token_stride * std::max<int64_t>(p.total_q, 1), om, rng);
    }
    if (rng.chance(50)) {
        p.lse = address(4, rng);
        p.lse_head_stride = p.total_q + rng.in(0, 64);
    }
    p.cu_seqlens_q = static_cast<const int32_t*>(address(5, rng));
    p.seq_lens_k = static_cast<const int32_t*>(address(6, rng));
    p.block_table = static_cast<const int32_t*>(address(7, rng));
    p.block_table_stride = rng.in(1, 1 << 16);
    if (p.q_dtype == WIDEATTN_DTYPE_E4M3) p.q_scale = static_cast<const float*>(address(8, rng));
    if (p.kv_dtype == WIDEATTN_DTYPE_E4M3) {
        p.k_scale = static_cast<const float*>(address(9, rng));
        p.v_scale = static_cast<const float*>(address(10, rng));
    }
    if (rng.chance(25)) p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    return p;
}

wideattn_quantize_params random_quantize(Random& rng) {
    wideattn_quantize_params p{};
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    p.heads = static_cast<int32_t>(rng.in(1, 16));
    p.head_dim = static_cast<int32_t>(8 * rng.in(1, 128));
    p.tokens = static_cast<int32_t>(rng.in(0, 20000));
    p.src = address(0, rng);
    p.src_head_stride = padded(p.head_dim, 8, rng);
    p.src_token_stride = padded(p.src_head_stride * p.heads, 8, rng);
    p.cache = address(1, rng);
    p.cache_head_stride = padded(p.head_dim, 8, rng);
    p.cache_slot_stride = padded(p.cache_head_stride * p.heads, 8, rng);
    p.block_size = static_cast<int32_t>(rng.in(1, 128));
    p.cache_block_stride = padded(p.cache_slot_stride * p.block_size, 8, rng);
    p.num_blocks = static_cast<int32_t>(rng.in(1, 4096));
    p.scale = static_cast<const float*>(address(2, rng));
    if (rng.chance(50)) p.nonfinite_count = static_cast<int32_t*>(address(3, rng));
    if (rng.chance(70))
        p.slot_mapping = static_cast<const int64_t*>(address(4, rng));
    else
        p.tokens = static_cast<int32_t>(std::min<int64_t>(p.tokens, int64_t{p.num_blocks} * p.block_size));
    return p;
}

wideattn_scale_params random_scale(Random& rng) {
    const wideattn_quantize_params q = random_quantize(rng);
    wideattn_scale_params p{};
    p.src = q.src;
    p.src_token_stride = q.src_token_stride;
    p.src_head_stride = q.src_head_stride;
    p.slot_mapping = q.slot_mapping;
    p.scale = static_cast<float*>(const_cast<float*>(q.scale));
    p.nonfinite_count = q.nonfinite_count;
    p.tokens = q.tokens;
    p.heads = q.heads;
    p.head_dim = q.head_dim;
    p.src_dtype = q.src_dtype;
    return p;
}

// An extreme or random value for a field of `kind`, written into `params` at the field.
void mutate(void* params, const Field& f, Random& rng) {
    char* at = static_cast<char*>(params) + f.offset;
    const int shift = static_cast<int>(rng.in(30, 62));
    const int64_t near_power = (int64_t{1} << shift) + rng.pick({int64_t{-8}, int64_t{0}, int64_t{8}});
    if (f.kind == Field::kInt32) {
        const int32_t values[] = {0, -1, 1, 2, 7, 8, 15, 16, 17, 512, 4096, INT32_MAX, INT32_MIN, INT32_MAX - 15,
                                  static_cast<int32_t>(rng.bits())};
        const int32_t v = rng.pick(values);
        std::memcpy(at, &v, sizeof v);
    } else if (f.kind == Field::kInt64) {
        int64_t current = 0;
        std::memcpy(&current, at, sizeof current);
        int64_t scaled = 0;
        const int64_t values[] = {0, -1, 1, 8, 16, 512, int64_t{1} << 31, int64_t{1} << 32, INT64_MAX, INT64_MIN,
                                  INT64_MAX - 7, near_power, __builtin_mul_overflow(current, int64_t{1} << (shift - 29),
                                                                                    &scaled) ? INT64_MAX : scaled,
                                  static_cast<int64_t>(rng.bits())};
        const int64_t v = rng.pick(values);
        std::memcpy(at, &v, sizeof v);
    } else if (f.kind == Field::kPointer) {
        const uintptr_t values[] = {0, 1, 8, 16, UINTPTR_MAX, UINTPTR_MAX - 15, UINTPTR_MAX - 0xfff,
                                    uintptr_t{1} << 63, rng.bits() & ~uintptr_t{15}, rng.bits()};
        const uintptr_t v = rng.pick(values);
        std::memcpy(at, &v, sizeof v);
    } else {
        const float values[] = {0.0f, -0.0f, -1.0f, NAN, INFINITY, -INFINITY, FLT_MIN / 2, FLT_MAX, 1e-30f};
        const float v = rng.pick(values);
        std::memcpy(at, &v, sizeof v);
    }
}

// The refusal names a field of the struct first ("params" for a NULL struct), and for an
// integer or pointer field written as NAME=VALUE, the value the field holds.
template <size_t N>
bool names_a_field(const std::string& message, const void* params, const Field (&fields)[N]) {
    for (const Field& f : fields) {
        const size_t n = std::strlen(f.name);
        if (message.compare(0, n, f.name) != 0 || message.size() <= n) continue;
        if (message[n] == ' ') return true;
        if (message[n] != '=') continue;
        const char* at = static_cast<const char*>(params) + f.offset;
        std::string value;
        if (f.kind == Field::kInt32) {
            int32_t v;
            std::memcpy(&v, at, sizeof v);
            value = std::to_string(v);
        } else if (f.kind == Field::kInt64) {
            int64_t v;
            std::memcpy(&v, at, sizeof v);
            value = std::to_string(v);
        } else if (f.kind == Field::kPointer) {
            const void* v;
            std::memcpy(&v, at, sizeof v);
            char text[32];
            std::snprintf(text, sizeof text, "%p", v);
            value = text;
        } else {
            return true;
        }
        return message.compare(n + 1, value.size(), value) == 0;
    }
    return false;
}

// Oracle: the last byte of a tensor (rows of `row` elements along `dims` = (count, stride)),
// or -1 for an empty one, in 128-bit arithmetic.
i128 last_byte(int64_t elem, int64_t row, std::initializer_list<std::pair<int64_t, int64_t>> dims) {
    if (row <= 0) return -1;
    i128 last = row - 1;
    for (const auto& [count, stride] : dims) {
        if (count <= 0) return -1;
        last += i128{count - 1} * stride;
    }
    return last * elem;
}

bool reachable(const void* base, i128 last) {
    return last < 0 || (last <= kMaxOffset && i128{reinterpret_cast<uintptr_t>(base)} + last <= i128{UINTPTR_MAX});
}

// Oracle: no two output rows [token][head] of head_dim elements overlap.
bool rows_disjoint(const wideattn_prefill_params& p) {
    const int64_t rows = int64_t{p.total_q} * p.num_q_heads;
    if (rows <= 1) return true;
    if (rows <= static_cast<int64_t>(kBruteForceRows)) {
        std::vector<i128> starts;
        for (int64_t t = 0; t < p.total_q; ++t)
            for (int64_t h = 0; h < p.num_q_heads; ++h)
                starts.push_back(i128{t} * p.o_token_stride + i128{h} * p.o_head_stride);
        std::sort(starts.begin(), starts.end());
        for (size_t i = 1; i < starts.size(); ++i)
            if (starts[i] - starts[i - 1] < p.head_dim) return false;
        return true;
    }
    // Nested layouts only (what validation promises): the smaller stride covers a row, the
    // larger covers all rows of the smaller one's dimension.
    const bool token_outer = p.o_token_stride >= p.o_head_stride;
    const i128 inner = token_outer ? p.o_head_stride : p.o_token_stride;
    const i128 outer = token_outer ? p.o_token_stride : p.o_head_stride;
    const i128 inner_count = token_outer ? p.num_q_heads : p.total_q;
    const i128 outer_count = token_outer ? p.total_q : p.num_q_heads;
    if (inner_count == 1) return outer >= p.head_dim;
    return inner >= p.head_dim && (outer_count == 1 || outer >= inner * inner_count);
}

// Oracle: a tensor map kv_map_unsupported accepts nests and stays below the TMA stride limit.
bool tma_describable(const wideattn_prefill_params& p) {
    const i128 elem = dtype_size(p.kv_dtype);
    for (const bool v : {false, true}) {
        const i128 head = p.num_kv_heads == 1 ? p.head_dim : (v ? p.v_head_stride : p.k_head_stride);
        const i128 slot = v ? p.v_slot_stride : p.k_slot_stride;
        const i128 block = v ? p.v_block_stride : p.k_block_stride;
        if (head < p.head_dim || slot < head * p.num_kv_heads || block < slot * p.block_size) return false;
        if (block * elem >= kTmaStrideLimit) return false;
        const KvMapLayout layout = kv_map_layout(p, v);
        if (i128{layout.strides[kKvMapDimBlock - 1]} != block * elem) return false;
    }
    return true;
}

// Oracle for accepted prefill params.
bool prefill_sound(const wideattn_prefill_params& p) {
    const int64_t qs = dtype_size(p.q_dtype), ks = dtype_size(p.kv_dtype), os = dtype_size(p.o_dtype);
    if (qs == 0 || ks == 0 || os == 0 || !(p.softmax_scale > 0.0f) || !std::isfinite(p.softmax_scale)) return false;
    const int64_t lse_size = p.o_dtype == WIDEATTN_DTYPE_F64 ? 8 : 4;
    return reachable(p.q, last_byte(qs, p.head_dim, {{p.total_q, p.q_token_stride}, {p.num_q_heads, p.q_head_stride}})) &&
           reachable(p.k_cache, last_byte(ks, p.head_dim, {{p.num_blocks, p.k_block_stride},
                                                           {p.block_size, p.k_slot_stride},
                                                           {p.num_kv_heads, p.k_head_stride}})) &&
           reachable(p.v_cache, last_byte(ks, p.head_dim, {{p.num_blocks, p.v_block_stride},
                                                           {p.block_size, p.v_slot_stride},
                                                           {p.num_kv_heads, p.v_head_stride}})) &&
           reachable(p.o, last_byte(os, p.head_dim, {{p.total_q, p.o_token_stride}, {p.num_q_heads, p.o_head_stride}})) &&
           (!p.lse || reachable(p.lse, last_byte(lse_size, p.total_q, {{p.num_q_heads, p.lse_head_stride}}))) &&
           reachable(p.block_table, last_byte(4, (INT32_MAX - 1) / p.block_size + 1,
                                              {{p.num_seqs, p.block_table_stride}})) &&
           rows_disjoint(p);
}

bool source_sound(const void* src, int64_t token_stride, int64_t head_stride, int32_t tokens, int32_t heads,
                  int32_t head_dim, const int64_t* slot_mapping) {
    return reachable(src, last_byte(2, head_dim, {{tokens, token_stride}, {heads, head_stride}})) &&
           (!slot_mapping || reachable(slot_mapping, last_byte(8, tokens, {})));
}

bool quantize_sound(const wideattn_quantize_params& p) {
    return source_sound(p.src, p.src_token_stride, p.src_head_stride, p.tokens, p.heads, p.head_dim, p.slot_mapping) &&
           reachable(p.cache, last_byte(1, p.head_dim, {{p.num_blocks, p.cache_block_stride},
                                                        {p.block_size, p.cache_slot_stride},
                                                        {p.heads, p.cache_head_stride}})) &&
           (p.slot_mapping || i128{p.tokens} <= i128{p.num_blocks} * p.block_size);
}

bool scale_sound(const wideattn_scale_params& p) {
    return source_sound(p.src, p.src_token_stride, p.src_head_stride, p.tokens, p.heads, p.head_dim, p.slot_mapping);
}

// A synthetic bundle whose kernels cover the random shapes: selection, geometry and the
// tensor-map check run on every accepted call.
Manifest property_manifest() {
    Manifest m;
    std::string err;
    const std::string all_features = "\"varlen\", \"paged\", \"lse\"";
    REQUIRE_MESSAGE(parse_manifest(test::manifest_json({
                                       test::kernel_json("tma", "sm_90a", "bf16", 64, 512, 64, 1, 64,
                                                         all_features + ", \"tma_kv\"", 4, "0000000000000000",
                                                         "prefill", 2),
                                       test::kernel_json("mma", "sm_90a", "bf16", 64, 512, 64, 1, 64, all_features, 4,
                                                         "0000000000000000", "prefill", 1),
                                   }),
                                   &m, &err),
                    err);
    return m;
}

}  // namespace

namespace {

// Runs `body` on kSamplesPerSeed samples of each seed's random stream, naming the seed and the
// sample in a failure.
template <typename Body>
void for_each_sample(Body body) {
    for (const uint64_t seed : kSeeds) {
        Random rng(seed);
        for (int i = 0; i < kSamplesPerSeed; ++i) {
            CAPTURE(seed);
            CAPTURE(i);
            body(rng);
        }
    }
}

}  // namespace

TEST_CASE("validation property: random and mutated prefill params") {
    const Manifest manifest = property_manifest();
    int accepted_mutants = 0, refused = 0;
    for_each_sample([&](Random& rng) {
        wideattn_prefill_params p = random_prefill(rng);
        std::string message;
        REQUIRE_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
        REQUIRE(prefill_sound(p));
        const int mutations = static_cast<int>(rng.in(1, 3));
        std::string mutated;
        for (int m = 0; m < mutations; ++m) {
            const Field& f = rng.pick(kPrefillFields);
            mutate(&p, f, rng);
            mutated += std::string(m ? "," : "") + f.name;
        }
        CAPTURE(mutated);
        const wideattn_status status = validate_params(&p, &message);
        if (status == WIDEATTN_OK) {
            ++accepted_mutants;
            CHECK(prefill_sound(p));
            int32_t index = -1;
            std::string why;
            if (select_kernel(manifest.kernels, p, 9, 0, &index, &why) == WIDEATTN_OK) {
                const LaunchGeometry g = launch_geometry(manifest.kernels[index], p);
                CHECK(g.grid_y >= 1);
            }
            if (kv_map_unsupported(p).empty()) CHECK(tma_describable(p));
        } else {
            ++refused;
            CHECK(status == WIDEATTN_ERROR_INVALID_ARGUMENT);
            CHECK_MESSAGE(names_a_field(message, &p, kPrefillFields), message);
        }
    });
    // Both outcomes occur, so neither check above is vacuous.
    CHECK(accepted_mutants > 100);
    CHECK(refused > 1000);
}

TEST_CASE("validation property: random and mutated quantise and scale params") {
    int accepted = 0, refused = 0;
    for_each_sample([&](Random& rng) {
        wideattn_quantize_params q = random_quantize(rng);
        wideattn_scale_params s = random_scale(rng);
        std::string message;
        REQUIRE_MESSAGE(validate_quantize_params(&q, &message) == WIDEATTN_OK, message);
        REQUIRE_MESSAGE(validate_scale_params(&s, &message) == WIDEATTN_OK, message);
        const Field& qf = rng.pick(kQuantizeFields);
        const Field& sf = rng.pick(kScaleFields);
        mutate(&q, qf, rng);
        mutate(&s, sf, rng);
        CAPTURE(qf.name);
        CAPTURE(sf.name);
        wideattn_status status = validate_quantize_params(&q, &message);
        if (status == WIDEATTN_OK) {
            ++accepted;
            CHECK(quantize_sound(q));
        } else {
            ++refused;
            CHECK((status == WIDEATTN_ERROR_INVALID_ARGUMENT ||
                   (status == WIDEATTN_ERROR_UNSUPPORTED && q.src_dtype != WIDEATTN_DTYPE_BF16 &&
                    dtype_size(q.src_dtype) > 0)));
            CHECK_MESSAGE(names_a_field(message, &q, kQuantizeFields), message);
        }
        status = validate_scale_params(&s, &message);
        if (status == WIDEATTN_OK) {
            ++accepted;
            CHECK(scale_sound(s));
        } else {
            ++refused;
            CHECK((status == WIDEATTN_ERROR_INVALID_ARGUMENT ||
                   (status == WIDEATTN_ERROR_UNSUPPORTED && s.src_dtype != WIDEATTN_DTYPE_BF16 &&
                    dtype_size(s.src_dtype) > 0)));
            CHECK_MESSAGE(names_a_field(message, &s, kScaleFields), message);
        }
    });
    CHECK(accepted > 100);
    CHECK(refused > 1000);
}

TEST_CASE("validation property: the C API entry points agree with validation on mutated params") {
    wideattn_context* ctx = nullptr;
    REQUIRE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK);
    Random rng(kSeeds[0]);
    for (int i = 0; i < kSamplesPerSeed; ++i) {
        CAPTURE(i);
        wideattn_prefill_params p = random_prefill(rng);
        mutate(&p, rng.pick(kPrefillFields), rng);
        std::string message;
        const wideattn_status validated = validate_params(&p, &message);
        int32_t index = -1;
        const wideattn_status status = wideattn_is_supported(ctx, &p, 9, 0, &index);
        if (validated != WIDEATTN_OK) {
            CHECK(status == validated);
            CHECK(std::string(wideattn_last_error()) == message);
        } else {
            CHECK((status == WIDEATTN_OK || status == WIDEATTN_ERROR_UNSUPPORTED));
            if (status == WIDEATTN_OK) CHECK((index >= 0 && index < wideattn_kernel_count(ctx)));
        }
    }
    wideattn_close(ctx);
}

namespace {

// The K-from-V rules in the test's own words: what validation must accept of a description. A
// struct of C API 0.5.0's 32 bytes has no inv_freq (whatever the bytes after it hold), one of
// 0.6.0's 40 bytes no cos / sin table; sizes between 32 and 40 end inside inv_freq, sizes between
// 40 and 56 inside the table's fields; theta is not read when a frequency table is given (a cos /
// sin table leaves the positions past its rows to the formula: theta is still read); the cos / sin
// table's rows hold whole pairs of frequencies at 8-byte alignment, and its row count is 0 exactly
// when it is NULL.
constexpr uint32_t kKFromVFirstSize = 32;
constexpr uint32_t kKFromVSecondSize = 40;
bool cos_sin_sound(const wideattn_k_from_v& d) {
    if (d.struct_size < sizeof(wideattn_k_from_v)) return true;  // not read
    if (d.reserved2 != 0) return false;
    if (!d.cos_sin) return d.cos_sin_positions == 0;
    return d.cos_sin_positions >= 1 && reinterpret_cast<uintptr_t>(d.cos_sin) % 8 == 0 && d.rotary_dims >= 4 &&
           d.rotary_dims % 4 == 0;
}
bool k_from_v_sound(const wideattn_k_from_v& d, const wideattn_prefill_params& p) {
    const bool known_size = d.struct_size == kKFromVFirstSize || d.struct_size == kKFromVSecondSize ||
                            d.struct_size >= sizeof(wideattn_k_from_v);
    const float* table = d.struct_size >= kKFromVSecondSize ? d.inv_freq : nullptr;
    const bool frequencies = table ? reinterpret_cast<uintptr_t>(table) % sizeof(float) == 0
                                   : std::isfinite(d.rope_theta) && d.rope_theta > 0.0f;
    return known_size && d.rope_type == WIDEATTN_ROPE_PROPORTIONAL && d.pairing == WIDEATTN_ROPE_ROTATE_HALF &&
           d.reserved == 0 && d.k_norm_scale != nullptr &&
           reinterpret_cast<uintptr_t>(d.k_norm_scale) % sizeof(float) == 0 && frequencies && d.rotary_dims >= 0 &&
           d.rotary_dims % 2 == 0 && d.rotary_dims <= p.head_dim && cos_sin_sound(d) &&
           p.kv_dtype == WIDEATTN_DTYPE_BF16 && p.k_cache == nullptr;
}

// A description inside a zeroed buffer as large as any struct_size the mutations state (a caller's
// struct is as large as it says; the bytes past this library's 56 are zero: a newer header's
// fields left unset). The cos / sin table lies in an address window of its own above every output's,
// so no table, however many rows it states, overlaps an output.
constexpr uint32_t kKFromVSizes[] = {0, 1, 24, 31, 32, 33, 36, 39, 40, 41, 48, 52, 55, 56, 57, 64, 512};
constexpr int kCosSinWindow = 13;
union KFromVBuffer {
    wideattn_k_from_v desc;
    unsigned char bytes[512];
};

// One extreme value into one field of the description (or k_cache / kv_dtype of the params).
void mutate_k_from_v(wideattn_k_from_v* d, wideattn_prefill_params* p, Random& rng) {
    const int32_t ints[] = {0, 1, -1, -2, 2, 127, 128, 511, 512, 513, 1024, INT32_MIN, INT32_MAX};
    const float floats[] = {0.0f, -0.0f, -1.0f, 1e-30f, 1.0f, 1e6f, FLT_MAX, INFINITY, -INFINITY, NAN};
    switch (rng.in(0, 12)) {
        case 0: d->struct_size = rng.pick(kKFromVSizes); break;
        case 1: d->rope_type = rng.pick(ints); break;
        case 2: d->pairing = rng.pick(ints); break;
        case 3: d->reserved = rng.pick(ints); break;
        case 4: d->rope_theta = rng.pick(floats); break;
        case 5: d->rotary_dims = rng.pick(ints); break;
        case 6:
            d->k_norm_scale = rng.chance(50) ? nullptr
                                             : reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(address(11, rng)) +
                                                                              static_cast<uintptr_t>(rng.in(0, 3)));
            break;
        case 7: p->k_cache = rng.chance(50) ? nullptr : address(1, rng); break;
        case 8:
            d->inv_freq = rng.chance(50) ? nullptr
                                         : reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(address(12, rng)) +
                                                                          static_cast<uintptr_t>(rng.in(0, 3)));
            break;
        case 9:  // a table with its row count, or none
            if (rng.chance(50)) {
                d->cos_sin = nullptr;
                d->cos_sin_positions = 0;
            } else {
                d->cos_sin = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(address(kCosSinWindow, rng)) +
                                                           static_cast<uintptr_t>(rng.chance(50) ? 0 : rng.in(1, 7)));
                d->cos_sin_positions = rng.chance(50) ? static_cast<int32_t>(rng.in(1, 1 << 20)) : rng.pick(ints);
            }
            break;
        case 10: d->cos_sin_positions = rng.pick(ints); break;
        case 11: d->reserved2 = rng.pick(ints); break;
        default: p->kv_dtype = rng.chance(50) ? WIDEATTN_DTYPE_BF16 : WIDEATTN_DTYPE_F16; break;  // f16: refused
    }
}

}  // namespace

TEST_CASE("validation property: random and mutated K-from-V descriptions") {
    int accepted_mutants = 0, refused = 0;
    for_each_sample([&](Random& rng) {
        wideattn_prefill_params p = random_prefill(rng);
        if (p.kv_dtype != WIDEATTN_DTYPE_BF16) return;  // a bf16 V cache here (e4m3: test_validation.cpp)
        p.k_cache = nullptr;
        p.flags |= WIDEATTN_FLAG_K_FROM_V;
        KFromVBuffer buffer{};
        wideattn_k_from_v& d = buffer.desc;
        d = wideattn_k_from_v{sizeof(wideattn_k_from_v), WIDEATTN_ROPE_PROPORTIONAL,
                              static_cast<const float*>(address(11, rng)), static_cast<float>(rng.in(1, 1 << 30)),
                              static_cast<int32_t>(2 * rng.in(0, p.head_dim / 2)), WIDEATTN_ROPE_ROTATE_HALF, 0,
                              nullptr, nullptr, 0, 0};
        p.k_from_v = &d;
        std::string message;
        REQUIRE_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
        for (int m = static_cast<int>(rng.in(1, 2)); m > 0; --m) mutate_k_from_v(&d, &p, rng);
        const wideattn_status status = validate_params(&p, &message);
        CAPTURE(message);
        CHECK((status == WIDEATTN_OK) == k_from_v_sound(d, p));
        if (status == WIDEATTN_OK) {
            ++accepted_mutants;
        } else {
            ++refused;
            CHECK(status == WIDEATTN_ERROR_INVALID_ARGUMENT);
            const bool named = message.find("k_from_v.") != std::string::npos ||
                               message.find("wideattn_k_from_v.struct_size=") == 0 ||
                               message.find("k_cache=") == 0 || message.find("kv_dtype=") == 0;
            CHECK_MESSAGE(named, message);
        }
    });
    CHECK(accepted_mutants > 50);
    CHECK(refused > 500);
}
