// validation.cpp - argument validation of the C API's calls (see validation.h).
#include "dispatch/validation.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <vector>

#include "dispatch/checked_math.h"
#include "dispatch/versioned_struct.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "dispatch/manifest_format.h"

namespace wideattn {
std::string pointer_text(const void* ptr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", ptr);
    return buf;
}

namespace {

constexpr int64_t kMaxSeqKeys = INT32_MAX;  // seq_lens_k entries are int32
constexpr uint32_t kKnownFlags = WIDEATTN_FLAG_CHECK_METADATA | WIDEATTN_FLAG_V_TRANSPOSED |
                                 WIDEATTN_FLAG_K_FROM_V;  // wideattn_prefill_params.flags
constexpr uint32_t kKnownQuantizeFlags = WIDEATTN_FLAG_V_TRANSPOSED;  // wideattn_quantize_params.flags
constexpr int64_t kTransposedSlotStride = 1;  // the slots of a transposed V row are contiguous
constexpr char kRebuildOutFirstVersion[] = "0.8.0";  // wideattn_k_from_v_rebuild_out's first version

bool v_transposed(const wideattn_prefill_params& p) { return (p.flags & WIDEATTN_FLAG_V_TRANSPOSED) != 0; }
bool k_from_v(const wideattn_prefill_params& p) { return k_from_v_call(p.flags); }
// The versions of wideattn_k_from_v: C API 0.5.0's 32 bytes (up to `reserved`), 0.6.0's with inv_freq,
// 0.7.0's with the cos / sin table.
constexpr StructVersion kKFromVVersions[] = {{kKFromVSizeWithoutInvFreq, "0.5.0"},
                                             {kKFromVSizeWithoutCosSin, "0.6.0"},
                                             {sizeof(wideattn_k_from_v), "0.7.0"}};
static_assert(kKFromVSizeWithoutInvFreq == 32 && kKFromVSizeWithoutCosSin == 40 && sizeof(wideattn_k_from_v) == 56,
              "wideattn_k_from_v's versions: 32 bytes (C API 0.5.0), 40 with inv_freq (0.6.0), 56 with cos_sin "
              "(0.7.0)");

// One dimension of a tensor: `count` indices `stride` elements apart.
struct Dim {
    const char* count_name;
    int64_t count;
    const char* stride_name;
    int64_t stride;
};

// The byte offset of the last element of a tensor with elements (rows of `row` contiguous
// elements of `elem_size` bytes along `dims`, every count >= 1) into *bytes. On an int64 overflow
// returns false and *blamed: the dim whose term overflowed, else the largest term so far.
bool last_element_offset(int64_t elem_size, int64_t row, std::initializer_list<Dim> dims, int64_t* bytes,
                         const Dim** blamed) {
    // No overflow: rows are at most 2^32 elements of at most 8 bytes, or (the workspace) any
    // int64 count of single bytes.
    *bytes = (row - 1) * elem_size;
    const Dim* largest = nullptr;
    int64_t largest_bytes = -1;
    for (const Dim& d : dims) {
        int64_t term = 0;
        if (!checked_mul(d.count - 1, d.stride, &term) || !checked_mul(term, elem_size, &term)) {
            *blamed = &d;
            return false;
        }
        if (term > largest_bytes) largest = &d, largest_bytes = term;
        if (!checked_add(*bytes, term, bytes)) {
            *blamed = largest;
            return false;
        }
    }
    return true;
}

// Whether the rows of `row_size` (in the strides' unit: bytes for the e4m3 cache, elements for
// the prefill caches) that a tensor's dims (listed outermost first) address are disjoint: of the
// dims with more than one index, taken from the smallest stride up (equal strides: the inner dim
// first), the first stride covers a row and each next one covers every row of the dims inside it
// (a product that overflows int64 is more than any stride covers). Otherwise *why says which
// stride falls short; `what` names the rows.
bool rows_nest(const char* what, const char* row_name, int64_t row_size, std::initializer_list<Dim> dims,
               std::string* why) {
    // No allocation on success (a launch path runs this): the varying dims in a fixed array, the
    // refusal's text built only when it is needed.
    constexpr size_t kMaxDims = 4;
    const Dim* varying[kMaxDims];
    size_t n = 0;
    for (auto d = std::rbegin(dims); d != std::rend(dims) && n < kMaxDims; ++d)
        if (d->count > 1) varying[n++] = &*d;
    std::stable_sort(varying, varying + n, [](const Dim* a, const Dim* b) { return a->stride < b->stride; });
    int64_t span = row_size;  // what one index of the next dim must step over
    const Dim* inner = nullptr;  // the dim whose rows `span` covers (none: a row)
    for (size_t i = 0; i < n; ++i) {
        const Dim* d = varying[i];
        if (d->stride < span) {
            std::ostringstream s;
            s << d->stride_name << "=" << d->stride << " is smaller than ";
            if (inner)
                s << inner->stride_name << " x " << inner->count_name << " = " << inner->stride << " x "
                  << inner->count;
            else
                s << row_name;
            s << " = " << span << ": " << what << " overlap";
            *why = s.str();
            return false;
        }
        inner = d;
        if (!checked_mul(d->stride, d->count, &span)) span = INT64_MAX;
    }
    return true;
}

// Appends the span of a tensor that passed tensor_fits (rows of `row` elements of `elem_size`
// along `dims`) to *spans; a tensor without elements (a count or row of 0, a NULL base) has none.
// Spans in fixed storage: the most a call has (the prefill's 12; 14 with K from V, whose three tables
// come with no k_cache; 17 for a K-from-V rebuild, the out caches and table added), without an
// allocation.
struct SpanList {
    static constexpr size_t kCapacity = 20;
    Span items[kCapacity];
    size_t count = 0;
    void push_back(const Span& s) {
        if (count < kCapacity) items[count++] = s;
    }
};

template <typename Spans>
void add_span(Spans* spans, const char* name, const void* base, bool written, int64_t elem_size,
              int64_t row, std::initializer_list<Dim> dims) {
    if (!base || row <= 0) return;
    for (const Dim& d : dims)
        if (d.count <= 0) return;
    int64_t bytes = 0;
    const Dim* blamed = nullptr;
    if (!last_element_offset(elem_size, row, dims, &bytes, &blamed)) bytes = INT64_MAX;
    const uintptr_t first = reinterpret_cast<uintptr_t>(base);
    uintptr_t last = UINTPTR_MAX;  // the end of the address space where the last element's bytes reach it
    if (static_cast<uint64_t>(bytes) + static_cast<uint64_t>(elem_size - 1) <= UINTPTR_MAX - first)
        last = first + static_cast<uint64_t>(bytes) + static_cast<uint64_t>(elem_size - 1);
    spans->push_back({name, first, last, written});
}

class Validator {
public:
    explicit Validator(std::string* message) : message_(message) {}

    bool fail(const std::string& text) {
        *message_ = text;
        return false;
    }
    bool not_null(const void* ptr, const char* name) {
        return ptr ? true : fail(std::string(name) + " is NULL");
    }
    bool aligned(const void* ptr, uintptr_t alignment, const char* name) {
        if (reinterpret_cast<uintptr_t>(ptr) % alignment == 0) return true;
        return fail(std::string(name) + "=" + pointer_text(ptr) + " is not " + std::to_string(alignment) +
                    "-byte aligned");
    }
    // A stride must be positive and keep every row 16-byte aligned.
    bool stride(int64_t value, int32_t elem_size, const char* name) {
        if (value < 1) return fail(std::string(name) + "=" + std::to_string(value) + " must be >= 1");
        const int64_t multiple = kTensorAlignment / elem_size;
        if (value % multiple != 0)
            return fail(std::string(name) + "=" + std::to_string(value) + " is not a multiple of " +
                        std::to_string(multiple) + " elements (rows must stay 16-byte aligned)");
        return true;
    }
    // A byte stride or size that must be a positive multiple of `multiple_of`.
    bool multiple(int64_t value, int64_t multiple_of, const char* name) {
        if (value >= 1 && value % multiple_of == 0) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " is not a positive multiple of " +
                    std::to_string(multiple_of));
    }
    bool at_least(int64_t value, int64_t lo, const char* name) {
        if (value >= lo) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " must be >= " + std::to_string(lo));
    }
    bool dtype(int32_t value, const char* name) {
        if (dtype_size(value) > 0) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " is not a wideattn_dtype (0..4)");
    }
    // The output rows [token][head] must not overlap (rows_nest: of the dimensions with more than
    // one index, the inner stride covers head_dim and the outer one every row of the inner).
    bool output_rows_disjoint(int64_t token_stride, int64_t head_stride, int32_t total_q, int32_t heads,
                              int32_t head_dim) {
        std::string why;
        if (rows_nest("output rows", "head_dim", head_dim,
                      {{"total_q", total_q, "o_token_stride", token_stride},
                       {"num_q_heads", heads, "o_head_stride", head_stride}},
                      &why))
            return true;
        std::ostringstream s;
        s << "o_token_stride=" << token_stride << " and o_head_stride=" << head_stride
          << " make output rows overlap (head_dim=" << head_dim << ", num_q_heads=" << heads
          << ", total_q=" << total_q << ")";
        return fail(s.str());
    }
    // The rows of `row_size` that an output tensor's dims (listed outermost first) address do not
    // overlap (rows_nest); `what` names the rows in the refusal.
    bool rows_disjoint(const char* what, const char* row_name, int64_t row_size, std::initializer_list<Dim> dims) {
        std::string why;
        return rows_nest(what, row_name, row_size, dims, &why) || fail(why);
    }
    // Every element of tensor `name` (rows of `row` <= 2^32 contiguous elements of `elem_size`
    // <= 8 bytes at base + the dims' offsets) lies less than 2^63 bytes past `base` and below the
    // end of the address space, so no offset the kernels compute can overflow. A tensor with a
    // count of 0 has no element to reach.
    bool tensor_fits(const char* name, const void* base, int64_t elem_size, int64_t row,
                     std::initializer_list<Dim> dims) {
        if (row <= 0) return true;
        for (const Dim& d : dims)
            if (d.count <= 0) return true;
        int64_t bytes = 0;
        if (const Dim* blamed = nullptr; !last_element_offset(elem_size, row, dims, &bytes, &blamed))
            return too_far(name, blamed->stride_name, blamed->stride, blamed->count_name, blamed->count, elem_size);
        const uintptr_t address = reinterpret_cast<uintptr_t>(base);
        if (static_cast<uint64_t>(bytes) <= UINTPTR_MAX - address) return true;
        return fail(past_address_space(name, base, static_cast<uint64_t>(bytes)));
    }
    // No output's bytes overlap another output's or an input's (inputs may share bytes: they are
    // only read). The refusal names both tensors and their byte ranges.
    bool apart(const SpanList& spans) { return spans_apart(spans.items, spans.count, message_); }

private:
    // The refusal of tensor_fits: `field`=value (with `count_name`=count indices) takes the
    // tensor's last element 2^63 bytes or more past its base.
    bool too_far(const char* tensor, const char* field, int64_t value, const char* count_name, int64_t count,
                 int64_t elem_size) {
        std::ostringstream s;
        s << field << "=" << value;
        if (count_name) s << " with " << count_name << "=" << count;
        s << " puts the last element of " << tensor << " (" << elem_size
          << "-byte elements) 2^63 bytes or more past its start: the offsets overflow";
        return fail(s.str());
    }

    std::string* message_;
};

// k_cache: set for a K+V call (NULL allowed for a plan), NULL with WIDEATTN_FLAG_K_FROM_V.
bool check_k_cache(Validator& v, const wideattn_prefill_params& p, bool run_tensors_optional) {
    if (k_from_v(p)) {
        if (!p.k_cache) return true;
        return v.fail("k_cache=" + pointer_text(p.k_cache) +
                      " is set but flags has WIDEATTN_FLAG_K_FROM_V: K is rebuilt from v_cache (pass NULL)");
    }
    if (p.k_cache || run_tensors_optional) return true;
    return v.fail("k_cache is NULL (a V-only cache needs WIDEATTN_FLAG_K_FROM_V in flags and params.k_from_v)");
}

// Dtypes known, every pointer set and aligned, counts in range.
// `run_tensors_optional`: q, k_cache, v_cache and o may be NULL (wideattn_plan_create).
bool check_pointers_and_counts(Validator& v, const wideattn_prefill_params& p, bool run_tensors_optional) {
    const auto run_tensor = [&](const void* ptr, const char* name) {
        return (run_tensors_optional && !ptr) || v.not_null(ptr, name);
    };
    return v.dtype(p.q_dtype, "q_dtype") && v.dtype(p.kv_dtype, "kv_dtype") && v.dtype(p.o_dtype, "o_dtype") &&
           run_tensor(p.q, "q") && check_k_cache(v, p, run_tensors_optional) && run_tensor(p.v_cache, "v_cache") &&
           run_tensor(p.o, "o") && v.not_null(p.cu_seqlens_q, "cu_seqlens_q") &&
           v.not_null(p.seq_lens_k, "seq_lens_k") && v.not_null(p.block_table, "block_table") &&
           v.aligned(p.q, kTensorAlignment, "q") && v.aligned(p.k_cache, kTensorAlignment, "k_cache") &&
           v.aligned(p.v_cache, kTensorAlignment, "v_cache") && v.aligned(p.o, kTensorAlignment, "o") &&
           v.aligned(p.cu_seqlens_q, sizeof(int32_t), "cu_seqlens_q") &&
           v.aligned(p.seq_lens_k, sizeof(int32_t), "seq_lens_k") &&
           v.aligned(p.block_table, sizeof(int32_t), "block_table") && v.at_least(p.num_seqs, 1, "num_seqs") &&
           v.at_least(p.total_q, 0, "total_q") && v.at_least(p.num_kv_heads, 1, "num_kv_heads") &&
           v.at_least(p.num_q_heads, 1, "num_q_heads") && v.at_least(p.head_dim, 1, "head_dim") &&
           v.at_least(p.num_blocks, 1, "num_blocks") && v.at_least(p.block_table_stride, 1, "block_table_stride");
}

// Head grouping, page size, softmax scale, the flags and head_dim (after the dtypes
// and counts passed check_pointers_and_counts).
bool check_shape(Validator& v, const wideattn_prefill_params& p) {
    if (p.num_q_heads % p.num_kv_heads != 0) {
        std::ostringstream s;
        s << "num_q_heads=" << p.num_q_heads << " is not a multiple of num_kv_heads=" << p.num_kv_heads;
        return v.fail(s.str());
    }
    if (p.block_size < kPageSizeMultiple || p.block_size % kPageSizeMultiple != 0) {
        std::ostringstream s;
        s << "block_size=" << p.block_size << " is not a positive multiple of " << kPageSizeMultiple;
        return v.fail(s.str());
    }
    if (!std::isfinite(p.softmax_scale) || p.softmax_scale <= 0.0f) {
        std::ostringstream s;
        s << "softmax_scale=" << p.softmax_scale << " must be finite and > 0";
        return v.fail(s.str());
    }
    if (const uint32_t unknown = static_cast<uint32_t>(p.flags) & ~kKnownFlags; unknown != 0) {
        std::ostringstream s;
        s << "flags=" << p.flags << " has unknown bits 0x" << std::hex << unknown << std::dec
          << " (the flags are WIDEATTN_FLAG_CHECK_METADATA = " << WIDEATTN_FLAG_CHECK_METADATA
          << ", WIDEATTN_FLAG_V_TRANSPOSED = " << WIDEATTN_FLAG_V_TRANSPOSED
          << " and WIDEATTN_FLAG_K_FROM_V = " << WIDEATTN_FLAG_K_FROM_V << ")";
        return v.fail(s.str());
    }
    if (v_transposed(p) && p.kv_dtype != WIDEATTN_DTYPE_E4M3) {
        std::ostringstream s;
        s << "flags has WIDEATTN_FLAG_V_TRANSPOSED but kv_dtype=" << dtype_name(p.kv_dtype)
          << ": the transposed V layout holds e4m3 codes only";
        return v.fail(s.str());
    }
    const int32_t q_size = dtype_size(p.q_dtype), kv_size = dtype_size(p.kv_dtype);
    if (p.head_dim % (kTensorAlignment / kv_size) != 0 || p.head_dim % (kTensorAlignment / q_size) != 0) {
        std::ostringstream s;
        s << "head_dim=" << p.head_dim << " is not a multiple of 16 bytes of its elements";
        return v.fail(s.str());
    }
    return true;
}

// The rows of K from V's cos / sin table: cos_sin_positions of them, rotary_dims / 2 entries apart.
Dim cos_sin_rows(const wideattn_k_from_v& kfv) {
    return {"k_from_v.cos_sin_positions", kfv.cos_sin_positions, "k_from_v.rotary_dims / 2", kfv.rotary_dims / 2};
}

// K from V's cos / sin table (C API 0.7.0; after rotary_dims passed its own check): NULL with no
// rows, or rows of whole pairs of frequencies at kCosSinAlignment; reserved2 0 either way.
bool check_cos_sin(Validator& v, const wideattn_k_from_v& kfv) {
    std::ostringstream s;
    if (kfv.reserved2 != 0) {
        s << "k_from_v.reserved2=" << kfv.reserved2 << " must be 0";
        return v.fail(s.str());
    }
    if (!kfv.cos_sin) {
        if (kfv.cos_sin_positions == 0) return true;
        s << "k_from_v.cos_sin_positions=" << kfv.cos_sin_positions
          << " must be 0 without a cos_sin table (k_from_v.cos_sin is NULL)";
        return v.fail(s.str());
    }
    if (kfv.cos_sin_positions < 1) {
        s << "k_from_v.cos_sin_positions=" << kfv.cos_sin_positions << " must be >= 1 with a cos_sin table";
        return v.fail(s.str());
    }
    if (!v.aligned(kfv.cos_sin, kCosSinAlignment, "k_from_v.cos_sin")) return false;
    if (kfv.rotary_dims < kCosSinRotaryDimsMultiple || kfv.rotary_dims % kCosSinRotaryDimsMultiple != 0) {
        s << "k_from_v.rotary_dims=" << kfv.rotary_dims << " must be a positive multiple of "
          << kCosSinRotaryDimsMultiple << " with a cos_sin table (its rows hold whole 8-byte pairs of frequencies)";
        return v.fail(s.str());
    }
    return true;
}

// K from V: the description readable and in range, a bf16 or e4m3 V (after check_shape: head_dim
// even). Which calls of each a kernel serves is selection's question (e4m3: single-token decode).
bool check_k_from_v(Validator& v, const wideattn_prefill_params& p) {
    if (!k_from_v(p)) return true;
    wideattn_k_from_v kfv{};
    std::string message;
    if (read_k_from_v(p, &kfv, &message) != WIDEATTN_OK) return v.fail(message);
    std::ostringstream s;
    if (p.kv_dtype != WIDEATTN_DTYPE_BF16 && p.kv_dtype != WIDEATTN_DTYPE_E4M3) {
        s << "kv_dtype=" << dtype_name(p.kv_dtype)
          << " with WIDEATTN_FLAG_K_FROM_V: K is rebuilt from a bf16 or e4m3 V cache only (no kernel rebuilds it "
             "from another dtype)";
        return v.fail(s.str());
    }
    if (kfv.rope_type != WIDEATTN_ROPE_PROPORTIONAL) {
        s << "k_from_v.rope_type=" << kfv.rope_type << " is not a RoPE type (WIDEATTN_ROPE_PROPORTIONAL = "
          << WIDEATTN_ROPE_PROPORTIONAL << " is the one defined)";
        return v.fail(s.str());
    }
    if (kfv.pairing != WIDEATTN_ROPE_ROTATE_HALF) {
        s << "k_from_v.pairing=" << kfv.pairing << " is not a pairing (WIDEATTN_ROPE_ROTATE_HALF = "
          << WIDEATTN_ROPE_ROTATE_HALF << " is the one defined)";
        return v.fail(s.str());
    }
    if (kfv.reserved != 0) {
        s << "k_from_v.reserved=" << kfv.reserved << " must be 0";
        return v.fail(s.str());
    }
    if (!kfv.k_norm_scale) return v.fail("k_from_v.k_norm_scale is NULL (k_norm's weight, fp32 [head_dim])");
    if (!v.aligned(kfv.k_norm_scale, sizeof(float), "k_from_v.k_norm_scale")) return false;
    if (kfv.inv_freq && !v.aligned(kfv.inv_freq, sizeof(float), "k_from_v.inv_freq")) return false;
    // With the model's table the frequencies do not come from rope_theta: it is not read.
    if (!kfv.inv_freq && (!std::isfinite(kfv.rope_theta) || kfv.rope_theta <= 0.0f)) {
        s << "k_from_v.rope_theta=" << kfv.rope_theta << " must be finite and > 0 (or pass the model's k_from_v.inv_freq)";
        return v.fail(s.str());
    }
    if (kfv.rotary_dims < 0 || kfv.rotary_dims % 2 != 0 || kfv.rotary_dims > p.head_dim) {
        s << "k_from_v.rotary_dims=" << kfv.rotary_dims << " must be even and in 0..head_dim=" << p.head_dim
          << " (2 x the rotated frequencies; Gemma 4: 128 of 512)";
        return v.fail(s.str());
    }
    if (!check_cos_sin(v, kfv)) return false;
    const int64_t frequencies = kfv.rotary_dims / 2;
    return v.tensor_fits("k_from_v.k_norm_scale", kfv.k_norm_scale, sizeof(float), p.head_dim, {}) &&
           (!kfv.inv_freq || v.tensor_fits("k_from_v.inv_freq", kfv.inv_freq, sizeof(float), frequencies, {})) &&
           (!kfv.cos_sin || v.tensor_fits("k_from_v.cos_sin", kfv.cos_sin, kCosSinEntryBytes, frequencies,
                                          {cos_sin_rows(kfv)}));
}

// The slot stride of a transposed V layout: 1 (its page rows hold the slots contiguously).
bool check_transposed_slot_stride(Validator& v, int64_t stride, const char* name) {
    if (stride == kTransposedSlotStride) return true;
    std::ostringstream s;
    s << name << "=" << stride << " must be " << kTransposedSlotStride
      << " with WIDEATTN_FLAG_V_TRANSPOSED (the slots of a transposed page row are contiguous)";
    return v.fail(s.str());
}

// Every stride positive and row-aligned, and output rows that do not overlap.
bool check_strides(Validator& v, const wideattn_prefill_params& p) {
    const int32_t q_size = dtype_size(p.q_dtype), kv_size = dtype_size(p.kv_dtype), o_size = dtype_size(p.o_dtype);
    return v.stride(p.q_token_stride, q_size, "q_token_stride") &&
           v.stride(p.q_head_stride, q_size, "q_head_stride") &&
           (k_from_v(p) || (v.stride(p.k_block_stride, kv_size, "k_block_stride") &&
                            v.stride(p.k_slot_stride, kv_size, "k_slot_stride") &&
                            v.stride(p.k_head_stride, kv_size, "k_head_stride"))) &&
           v.stride(p.v_block_stride, kv_size, "v_block_stride") &&
           (v_transposed(p) ? check_transposed_slot_stride(v, p.v_slot_stride, "v_slot_stride")
                            : v.stride(p.v_slot_stride, kv_size, "v_slot_stride")) &&
           v.stride(p.v_head_stride, kv_size, "v_head_stride") &&
           v.stride(p.o_token_stride, o_size, "o_token_stride") &&
           v.stride(p.o_head_stride, o_size, "o_head_stride") &&
           v.output_rows_disjoint(p.o_token_stride, p.o_head_stride, p.total_q, p.num_q_heads, p.head_dim);
}

// The optional lse output: aligned for its type, one row of total_q per head.
bool check_lse(Validator& v, const wideattn_prefill_params& p) {
    if (!p.lse) return true;
    const uintptr_t lse_align = p.o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    if (!v.aligned(p.lse, lse_align, "lse")) return false;
    if (p.lse_head_stride < p.total_q) {
        std::ostringstream s;
        s << "lse_head_stride=" << p.lse_head_stride << " is smaller than total_q=" << p.total_q;
        return v.fail(s.str());
    }
    return true;
}

// A scale pointer exactly for each e4m3 input (q_scale for Q; k_scale and v_scale for K/V).
bool check_scales(Validator& v, const wideattn_prefill_params& p) {
    // A K-from-V call over an e4m3 cache has no K codes: k_scale may be NULL (a set one is not read).
    const bool e4m3_kv = p.kv_dtype == WIDEATTN_DTYPE_E4M3;
    const struct {
        const float* ptr;
        bool needed;
        bool taken;  // a set pointer is accepted
        const char* name;
        const char* dtype_field;
        int32_t dtype;
    } scales[] = {{p.q_scale, p.q_dtype == WIDEATTN_DTYPE_E4M3, p.q_dtype == WIDEATTN_DTYPE_E4M3, "q_scale", "q_dtype",
                   p.q_dtype},
                  {p.k_scale, e4m3_kv && !k_from_v(p), e4m3_kv, "k_scale", "kv_dtype", p.kv_dtype},
                  {p.v_scale, e4m3_kv, e4m3_kv, "v_scale", "kv_dtype", p.kv_dtype}};
    for (const auto& scale : scales) {
        if (scale.needed && !scale.ptr) {
            std::ostringstream s;
            s << scale.name << " is NULL but " << scale.dtype_field << "=e4m3 needs a scale";
            return v.fail(s.str());
        }
        if (!scale.taken && scale.ptr) {
            std::ostringstream s;
            s << scale.name << "=" << pointer_text(scale.ptr) << " is set but " << scale.dtype_field << "="
              << dtype_name(scale.dtype) << " takes no scale (pass NULL)";
            return v.fail(s.str());
        }
        if (scale.ptr && !v.aligned(scale.ptr, sizeof(float), scale.name)) return false;
    }
    return true;
}

// The split-KV fields: non-negative hints, a split count in range, and a workspace that is
// either absent (NULL, 0 bytes) or aligned and within reach of 64-bit addresses.
bool check_splits(Validator& v, const wideattn_prefill_params& p) {
    if (!v.at_least(p.max_seqlen_q, 0, "max_seqlen_q") || !v.at_least(p.max_seqlen_k, 0, "max_seqlen_k") ||
        !v.at_least(p.num_splits, 0, "num_splits") || !v.at_least(p.workspace_bytes, 0, "workspace_bytes"))
        return false;
    if (p.num_splits > WIDEATTN_MAX_SPLITS) {
        std::ostringstream s;
        s << "num_splits=" << p.num_splits << " is larger than WIDEATTN_MAX_SPLITS=" << WIDEATTN_MAX_SPLITS;
        return v.fail(s.str());
    }
    if (!p.workspace && p.workspace_bytes != 0) {
        std::ostringstream s;
        s << "workspace is NULL but workspace_bytes=" << p.workspace_bytes << " (pass 0 without a workspace)";
        return v.fail(s.str());
    }
    return !p.workspace || (v.aligned(p.workspace, kTensorAlignment, "workspace") &&
                            v.tensor_fits("workspace", p.workspace, 1, p.workspace_bytes, {}));
}

// Every tensor's last element within reach of 64-bit offsets (after the strides, counts and
// dtypes passed the checks above). The block table is bounded by the most keys a sequence can
// have (seq_lens_k is int32), as its entries live in device memory.
bool check_extents(Validator& v, const wideattn_prefill_params& p) {
    const int64_t q_size = dtype_size(p.q_dtype), kv_size = dtype_size(p.kv_dtype), o_size = dtype_size(p.o_dtype);
    const int64_t lse_size = p.o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    const int64_t table_row = (kMaxSeqKeys - 1) / p.block_size + 1;
    const int64_t int32_size = sizeof(int32_t);
    return v.tensor_fits("q", p.q, q_size, p.head_dim,
                         {{"total_q", p.total_q, "q_token_stride", p.q_token_stride},
                          {"num_q_heads", p.num_q_heads, "q_head_stride", p.q_head_stride}}) &&
           (k_from_v(p) || v.tensor_fits("k_cache", p.k_cache, kv_size, p.head_dim,
                                         {{"num_blocks", p.num_blocks, "k_block_stride", p.k_block_stride},
                                          {"block_size", p.block_size, "k_slot_stride", p.k_slot_stride},
                                          {"num_kv_heads", p.num_kv_heads, "k_head_stride", p.k_head_stride}})) &&
           (v_transposed(p)
                ? v.tensor_fits("v_cache", p.v_cache, kv_size, p.block_size,
                                {{"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride},
                                 {"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride},
                                 {"head_dim", p.head_dim, "block_size", p.block_size}})
                : v.tensor_fits("v_cache", p.v_cache, kv_size, p.head_dim,
                                {{"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride},
                                 {"block_size", p.block_size, "v_slot_stride", p.v_slot_stride},
                                 {"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride}})) &&
           v.tensor_fits("o", p.o, o_size, p.head_dim,
                         {{"total_q", p.total_q, "o_token_stride", p.o_token_stride},
                          {"num_q_heads", p.num_q_heads, "o_head_stride", p.o_head_stride}}) &&
           (!p.lse || v.tensor_fits("lse", p.lse, lse_size, p.total_q,
                                    {{"num_q_heads", p.num_q_heads, "lse_head_stride", p.lse_head_stride}})) &&
           v.tensor_fits("cu_seqlens_q", p.cu_seqlens_q, int32_size, int64_t{p.num_seqs} + 1, {}) &&
           v.tensor_fits("seq_lens_k", p.seq_lens_k, int32_size, p.num_seqs, {}) &&
           v.tensor_fits("block_table", p.block_table, int32_size, table_row,
                         {{"num_seqs", p.num_seqs, "block_table_stride", p.block_table_stride}});
}

// The spans of a K or V cache (elements of `elem_size`). A cache whose pages share rows (a block
// stride below the rows of one block, as in the token-row pages of dense K/V rows) counts up to
// the rows of its last block's first slot: its later slots are the rows of the blocks after it,
// so bytes past those rows need not belong to the cache.
void add_cache_span(SpanList* spans, const char* name, const void* base, int64_t elem_size,
                    const wideattn_prefill_params& p, Dim block, Dim slot, Dim head) {
    std::string why;
    if (rows_nest("cache rows", "head_dim", p.head_dim, {block, slot, head}, &why))
        add_span(spans, name, base, false, elem_size, p.head_dim, {block, slot, head});
    else
        add_span(spans, name, base, false, elem_size, p.head_dim, {block, head});
}

// No output (o, lse, the workspace) shares a byte with another output or with an input (q, the
// caches, the metadata arrays, the scales, K from V's k_norm_scale, inv_freq and cos_sin), after
// check_extents (so no span wraps).
void add_prefill_spans(const wideattn_prefill_params& p, SpanList* out) {
    const int64_t q_size = dtype_size(p.q_dtype), kv_size = dtype_size(p.kv_dtype), o_size = dtype_size(p.o_dtype);
    const int64_t lse_size = p.o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    const int64_t int32_size = sizeof(int32_t), float_size = sizeof(float);
    // A table row is read up to the most blocks the kernels address (check_extents' bound).
    const int64_t table_row = std::min(p.block_table_stride, (kMaxSeqKeys - 1) / p.block_size + 1);
    SpanList& spans = *out;
    add_span(&spans, "o", p.o, true, o_size, p.head_dim,
             {{"total_q", p.total_q, "o_token_stride", p.o_token_stride},
              {"num_q_heads", p.num_q_heads, "o_head_stride", p.o_head_stride}});
    add_span(&spans, "lse", p.lse, true, lse_size, p.total_q,
             {{"num_q_heads", p.num_q_heads, "lse_head_stride", p.lse_head_stride}});
    add_span(&spans, "workspace", p.workspace, true, 1, p.workspace_bytes, {});
    add_span(&spans, "q", p.q, false, q_size, p.head_dim,
             {{"total_q", p.total_q, "q_token_stride", p.q_token_stride},
              {"num_q_heads", p.num_q_heads, "q_head_stride", p.q_head_stride}});
    add_cache_span(&spans, "k_cache", p.k_cache, kv_size, p, {"num_blocks", p.num_blocks, "k_block_stride", p.k_block_stride},
                   {"block_size", p.block_size, "k_slot_stride", p.k_slot_stride},
                   {"num_kv_heads", p.num_kv_heads, "k_head_stride", p.k_head_stride});
    if (v_transposed(p))
        add_span(&spans, "v_cache", p.v_cache, false, kv_size, p.block_size,
                 {{"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride},
                  {"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride},
                  {"head_dim", p.head_dim, "block_size", p.block_size}});
    else
        add_cache_span(&spans, "v_cache", p.v_cache, kv_size, p,
                       {"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride},
                       {"block_size", p.block_size, "v_slot_stride", p.v_slot_stride},
                       {"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride});
    add_span(&spans, "cu_seqlens_q", p.cu_seqlens_q, false, int32_size, int64_t{p.num_seqs} + 1, {});
    add_span(&spans, "seq_lens_k", p.seq_lens_k, false, int32_size, p.num_seqs, {});
    add_span(&spans, "block_table", p.block_table, false, int32_size, table_row,
             {{"num_seqs", p.num_seqs, "block_table_stride", p.block_table_stride}});
    add_span(&spans, "q_scale", p.q_scale, false, float_size, 1, {});
    add_span(&spans, "k_scale", p.k_scale, false, float_size, 1, {});
    add_span(&spans, "v_scale", p.v_scale, false, float_size, 1, {});
    wideattn_k_from_v kfv{};
    std::string unused;
    if (k_from_v(p) && read_k_from_v(p, &kfv, &unused) == WIDEATTN_OK) {
        add_span(&spans, "k_from_v.k_norm_scale", kfv.k_norm_scale, false, float_size, p.head_dim, {});
        add_span(&spans, "k_from_v.inv_freq", kfv.inv_freq, false, float_size, kfv.rotary_dims / 2, {});
        add_span(&spans, "k_from_v.cos_sin", kfv.cos_sin, false, static_cast<int64_t>(kCosSinEntryBytes),
                 kfv.rotary_dims / 2, {cos_sin_rows(kfv)});
    }
}

bool check_overlaps(Validator& v, const wideattn_prefill_params& p) {
    SpanList spans;
    add_prefill_spans(p, &spans);
    return v.apart(spans);
}

// The quantise call's flags: known bits only; the transposed V layout with a slot mapping (it is
// a paged cache), pages of whole 16-slot groups and the contiguous slot stride it implies.
bool check_quantize_layout(Validator& v, const wideattn_quantize_params& p) {
    std::ostringstream s;
    if (const uint32_t unknown = static_cast<uint32_t>(p.flags) & ~kKnownQuantizeFlags; unknown != 0) {
        s << "flags=" << p.flags << " has unknown bits 0x" << std::hex << unknown << std::dec
          << " (the only flag is WIDEATTN_FLAG_V_TRANSPOSED = " << WIDEATTN_FLAG_V_TRANSPOSED << ")";
        return v.fail(s.str());
    }
    if ((p.flags & WIDEATTN_FLAG_V_TRANSPOSED) == 0) return true;
    if (!p.slot_mapping)
        return v.fail("slot_mapping is NULL with WIDEATTN_FLAG_V_TRANSPOSED (the transposed layout is a paged cache)");
    if (p.block_size < kPageSizeMultiple || p.block_size % kPageSizeMultiple != 0) {
        s << "block_size=" << p.block_size << " is not a positive multiple of " << kPageSizeMultiple
          << " (WIDEATTN_FLAG_V_TRANSPOSED interleaves groups of 16 slots)";
        return v.fail(s.str());
    }
    return check_transposed_slot_stride(v, p.cache_slot_stride, "cache_slot_stride");
}

// The source dtype of the quantise and amax kernels: a value that is no wideattn_dtype is
// INVALID_ARGUMENT (as the prefill dtypes are), a dtype other than bf16 UNSUPPORTED (no kernel
// takes it); WIDEATTN_OK for bf16.
wideattn_status check_src_dtype(int32_t src_dtype, std::string* message) {
    if (src_dtype == WIDEATTN_DTYPE_BF16) return WIDEATTN_OK;
    Validator v(message);
    if (!v.dtype(src_dtype, "src_dtype")) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    *message = "src_dtype=" + std::to_string(src_dtype) + " is not supported (bf16 = " +
               std::to_string(WIDEATTN_DTYPE_BF16) + ")";
    return WIDEATTN_ERROR_UNSUPPORTED;
}

// The bf16 source of the quantise and amax kernels, and its optional int64 slot mapping.
bool source_fits(Validator& v, const void* src, int64_t token_stride, int64_t head_stride, int32_t tokens,
                 int32_t heads, int32_t head_dim, const int64_t* slot_mapping) {
    return v.tensor_fits("src", src, dtype_size(WIDEATTN_DTYPE_BF16), head_dim,
                         {{"tokens", tokens, "src_token_stride", token_stride},
                          {"heads", heads, "src_head_stride", head_stride}}) &&
           (!slot_mapping || v.tensor_fits("slot_mapping", slot_mapping, sizeof(int64_t), tokens, {}));
}

// The spans of the read-only source of the quantise and amax kernels and of its slot mapping.
void add_source_spans(SpanList* spans, const void* src, int64_t token_stride, int64_t head_stride,
                      int32_t tokens, int32_t heads, int32_t head_dim, const int64_t* slot_mapping) {
    add_span(spans, "src", src, false, dtype_size(WIDEATTN_DTYPE_BF16), head_dim,
             {{"tokens", tokens, "src_token_stride", token_stride}, {"heads", heads, "src_head_stride", head_stride}});
    add_span(spans, "slot_mapping", slot_mapping, false, sizeof(int64_t), tokens, {});
}

}  // namespace

int32_t dtype_size(int32_t dtype) {
    switch (dtype) {
        case WIDEATTN_DTYPE_BF16:
        case WIDEATTN_DTYPE_F16: return 2;
        case WIDEATTN_DTYPE_F32: return 4;
        case WIDEATTN_DTYPE_F64: return 8;
        case WIDEATTN_DTYPE_E4M3: return 1;
        default: return 0;
    }
}

namespace {

wideattn_status validate_prefill(const wideattn_prefill_params* p, std::string* message, bool run_tensors_optional) {
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    Validator v(message);
    const bool ok = check_pointers_and_counts(v, *p, run_tensors_optional) && check_shape(v, *p) &&
                    check_k_from_v(v, *p) && check_strides(v, *p) && check_lse(v, *p) && check_scales(v, *p) &&
                    check_splits(v, *p) && check_extents(v, *p) && check_overlaps(v, *p);
    return ok ? WIDEATTN_OK : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

}  // namespace

wideattn_status read_k_from_v(const wideattn_prefill_params& p, wideattn_k_from_v* out, std::string* message) {
    *out = wideattn_k_from_v{};
    if (!k_from_v(p)) return WIDEATTN_OK;
    if (!p.k_from_v) {
        *message = "k_from_v is NULL but flags has WIDEATTN_FLAG_K_FROM_V (point it to a wideattn_k_from_v)";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    return read_versioned(p.k_from_v, kKFromVVersions, "wideattn_k_from_v", out, message)
               ? WIDEATTN_OK
               : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

wideattn_status validate_params(const wideattn_prefill_params* p, std::string* message) {
    return validate_prefill(p, message, false);
}

wideattn_status validate_plan_params(const wideattn_prefill_params* p, std::string* message) {
    return validate_prefill(p, message, true);
}

wideattn_status validate_quantize_params(const wideattn_quantize_params* p, std::string* message) {
    Validator v(message);
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    constexpr int32_t kCacheVecBytes = 8;  // the kernel stores 8 e4m3 bytes per thread
    if (const wideattn_status status = check_src_dtype(p->src_dtype, message); status != WIDEATTN_OK) return status;
    if (!check_quantize_layout(v, *p)) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    const bool transposed = (p->flags & WIDEATTN_FLAG_V_TRANSPOSED) != 0;
    // The cache's rows: head_dim codes [block][slot][head], or (transposed) block_size codes
    // [block][head][d] (byte strides).
    const std::initializer_list<Dim> engine_dims = {
        {"num_blocks", p->num_blocks, "cache_block_stride", p->cache_block_stride},
        {"block_size", p->block_size, "cache_slot_stride", p->cache_slot_stride},
        {"heads", p->heads, "cache_head_stride", p->cache_head_stride}};
    const std::initializer_list<Dim> transposed_dims = {
        {"num_blocks", p->num_blocks, "cache_block_stride", p->cache_block_stride},
        {"heads", p->heads, "cache_head_stride", p->cache_head_stride},
        {"head_dim", p->head_dim, "block_size", p->block_size}};
    const std::initializer_list<Dim>& cache_dims = transposed ? transposed_dims : engine_dims;
    const int64_t cache_row = transposed ? p->block_size : p->head_dim;
    const char* cache_row_name = transposed ? "block_size" : "head_dim";
    const bool ok = v.not_null(p->src, "src") && v.not_null(p->cache, "cache") && v.not_null(p->scale, "scale") &&
                    v.aligned(p->src, kTensorAlignment, "src") && v.aligned(p->cache, kCacheVecBytes, "cache") &&
                    (!p->slot_mapping || v.aligned(p->slot_mapping, sizeof(int64_t), "slot_mapping")) &&
                    v.aligned(p->scale, sizeof(float), "scale") &&
                    (!p->nonfinite_count || v.aligned(p->nonfinite_count, sizeof(int32_t), "nonfinite_count")) &&
                    v.at_least(p->tokens, 0, "tokens") && v.at_least(p->heads, 1, "heads") &&
                    v.at_least(p->head_dim, 1, "head_dim") && v.at_least(p->block_size, 1, "block_size") &&
                    v.at_least(p->num_blocks, 1, "num_blocks") &&
                    v.stride(p->src_token_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_token_stride") &&
                    v.stride(p->src_head_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_head_stride") &&
                    v.multiple(p->cache_block_stride, kCacheVecBytes, "cache_block_stride") &&
                    (transposed || v.multiple(p->cache_slot_stride, kCacheVecBytes, "cache_slot_stride")) &&
                    v.multiple(p->cache_head_stride, kCacheVecBytes, "cache_head_stride") &&
                    v.multiple(p->head_dim, kCacheVecBytes, "head_dim") &&
                    source_fits(v, p->src, p->src_token_stride, p->src_head_stride, p->tokens, p->heads, p->head_dim,
                                p->slot_mapping) &&
                    v.tensor_fits("cache", p->cache, 1, cache_row, cache_dims);
    // The kernel writes one row of head_dim codes per (block, slot, head), or of block_size codes
    // per (block, head, d): rows that overlap would race. A stride of a dim with one index
    // (block_size 1: the slot stride) is never applied.
    if (!ok || !v.rows_disjoint("cache rows", cache_row_name, cache_row, cache_dims))
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    const int64_t slots = int64_t{p->num_blocks} * p->block_size;
    if (!p->slot_mapping && p->tokens > slots) {
        std::ostringstream s;
        s << "tokens=" << p->tokens << " exceed num_blocks * block_size = " << slots
          << " slots with slot_mapping NULL (slot = token)";
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    // The outputs (the cache, the counter) share no byte with each other or the inputs.
    SpanList spans;
    add_span(&spans, "cache", p->cache, true, 1, cache_row, cache_dims);
    add_span(&spans, "nonfinite_count", p->nonfinite_count, true, sizeof(int32_t), 1, {});
    add_source_spans(&spans, p->src, p->src_token_stride, p->src_head_stride, p->tokens, p->heads, p->head_dim,
                     p->slot_mapping);
    add_span(&spans, "scale", p->scale, false, sizeof(float), 1, {});
    return v.apart(spans) ? WIDEATTN_OK : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

wideattn_status validate_k_from_v_rebuild(const wideattn_prefill_params* p, const wideattn_k_from_v_rebuild_out* out,
                                          wideattn_k_from_v_rebuild_out* out_copy, std::string* message) {
    Validator v(message);
    if (const wideattn_status status = validate_params(p, message); status != WIDEATTN_OK) return status;
    if (!k_from_v(*p)) {
        *message = "params.flags=" + std::to_string(p->flags) +
                   " lacks WIDEATTN_FLAG_K_FROM_V: wideattn_k_from_v_rebuild rebuilds the keys of a K-from-V call";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (v_transposed(*p)) {
        *message = "params.flags=" + std::to_string(p->flags) +
                   " has WIDEATTN_FLAG_V_TRANSPOSED: wideattn_k_from_v_rebuild reads V in the engine layout "
                   "v_cache[block][slot][kv_head][d] only";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (p->kv_dtype != WIDEATTN_DTYPE_BF16 && p->kv_dtype != WIDEATTN_DTYPE_E4M3) {
        *message = "params.kv_dtype=" + std::to_string(p->kv_dtype) +
                   ": wideattn_k_from_v_rebuild reads a BF16 or an E4M3 V cache";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!out) {
        *message = "out is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!read_versioned(out, sizeof(wideattn_k_from_v_rebuild_out), kRebuildOutFirstVersion,
                        "wideattn_k_from_v_rebuild_out", out_copy, message))
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    const wideattn_k_from_v_rebuild_out& o = *out_copy;
    const int32_t bf16 = dtype_size(WIDEATTN_DTYPE_BF16);
    // A row of out.block_table is read up to the most pages the kernel addresses (keys are int32),
    // as params' block_table (add_prefill_spans).
    const int64_t out_table_row = std::min(o.block_table_stride, (kMaxSeqKeys - 1) / p->block_size + 1);
    const std::initializer_list<Dim> k_dims = {{"out.num_blocks", o.num_blocks, "out.k_block_stride", o.k_block_stride},
                                               {"block_size", p->block_size, "out.k_slot_stride", o.k_slot_stride},
                                               {"num_kv_heads", p->num_kv_heads, "out.k_head_stride", o.k_head_stride}};
    const std::initializer_list<Dim> v_dims = {{"out.num_blocks", o.num_blocks, "out.v_block_stride", o.v_block_stride},
                                               {"block_size", p->block_size, "out.v_slot_stride", o.v_slot_stride},
                                               {"num_kv_heads", p->num_kv_heads, "out.v_head_stride", o.v_head_stride}};
    const bool ok =
        (o.reserved == 0 || v.fail("out.reserved=" + std::to_string(o.reserved) + " must be 0")) &&
        (o.reserved2 == 0 || v.fail("out.reserved2=" + std::to_string(o.reserved2) + " must be 0")) &&
        v.not_null(o.k_cache, "out.k_cache") && v.not_null(o.v_cache, "out.v_cache") &&
        v.not_null(o.block_table, "out.block_table") && v.aligned(o.k_cache, kTensorAlignment, "out.k_cache") &&
        v.aligned(o.v_cache, kTensorAlignment, "out.v_cache") &&
        v.aligned(o.block_table, sizeof(int32_t), "out.block_table") &&
        v.at_least(o.num_blocks, 1, "out.num_blocks") && v.at_least(o.block_table_stride, 1, "out.block_table_stride") &&
        v.stride(o.k_block_stride, bf16, "out.k_block_stride") && v.stride(o.k_slot_stride, bf16, "out.k_slot_stride") &&
        v.stride(o.k_head_stride, bf16, "out.k_head_stride") && v.stride(o.v_block_stride, bf16, "out.v_block_stride") &&
        v.stride(o.v_slot_stride, bf16, "out.v_slot_stride") && v.stride(o.v_head_stride, bf16, "out.v_head_stride") &&
        v.tensor_fits("out.k_cache", o.k_cache, bf16, p->head_dim, k_dims) &&
        v.tensor_fits("out.v_cache", o.v_cache, bf16, p->head_dim, v_dims) &&
        v.tensor_fits("out.block_table", o.block_table, sizeof(int32_t), out_table_row,
                      {{"num_seqs", p->num_seqs, "out.block_table_stride", o.block_table_stride}}) &&
        // The kernel writes one row of head_dim per (block, slot, head) of each: rows that overlap would race.
        v.rows_disjoint("out.k_cache rows", "head_dim", p->head_dim, k_dims) &&
        v.rows_disjoint("out.v_cache rows", "head_dim", p->head_dim, v_dims);
    if (!ok) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    // The out caches share no byte with each other nor with an input (params' tensors, out's table).
    SpanList spans;
    add_span(&spans, "out.k_cache", o.k_cache, true, bf16, p->head_dim, k_dims);
    add_span(&spans, "out.v_cache", o.v_cache, true, bf16, p->head_dim, v_dims);
    add_span(&spans, "out.block_table", o.block_table, false, sizeof(int32_t), out_table_row,
             {{"num_seqs", p->num_seqs, "out.block_table_stride", o.block_table_stride}});
    add_prefill_spans(*p, &spans);
    return v.apart(spans) ? WIDEATTN_OK : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

wideattn_status validate_scale_params(const wideattn_scale_params* p, std::string* message) {
    Validator v(message);
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    constexpr int32_t kSrcVecElems = 8;  // the kernel loads 8 bf16 per thread and token
    if (const wideattn_status status = check_src_dtype(p->src_dtype, message); status != WIDEATTN_OK) return status;
    const bool ok = v.not_null(p->src, "src") && v.not_null(p->scale, "scale") &&
                    v.aligned(p->src, kTensorAlignment, "src") && v.aligned(p->scale, sizeof(float), "scale") &&
                    (!p->slot_mapping || v.aligned(p->slot_mapping, sizeof(int64_t), "slot_mapping")) &&
                    (!p->nonfinite_count || v.aligned(p->nonfinite_count, sizeof(int32_t), "nonfinite_count")) &&
                    v.at_least(p->tokens, 0, "tokens") && v.at_least(p->heads, 1, "heads") &&
                    v.at_least(p->head_dim, 1, "head_dim") &&
                    v.stride(p->src_token_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_token_stride") &&
                    v.stride(p->src_head_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_head_stride") &&
                    v.multiple(p->head_dim, kSrcVecElems, "head_dim") &&
                    source_fits(v, p->src, p->src_token_stride, p->src_head_stride, p->tokens, p->heads, p->head_dim,
                                p->slot_mapping);
    if (!ok) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    // The outputs (the scale, the counter) share no byte with each other or the inputs.
    SpanList spans;
    add_span(&spans, "scale", p->scale, true, sizeof(float), 1, {});
    add_span(&spans, "nonfinite_count", p->nonfinite_count, true, sizeof(int32_t), 1, {});
    add_source_spans(&spans, p->src, p->src_token_stride, p->src_head_stride, p->tokens, p->heads, p->head_dim,
                     p->slot_mapping);
    return v.apart(spans) ? WIDEATTN_OK : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

void prefill_spans(const wideattn_prefill_params& p, std::vector<Span>* spans) {
    SpanList list;
    add_prefill_spans(p, &list);
    spans->insert(spans->end(), list.items, list.items + list.count);
}

bool spans_apart(const Span* spans, size_t count, std::string* message) {
    for (size_t i = 0; i < count; ++i)
        for (size_t j = 0; j < count; ++j) {
            const Span &a = spans[i], &b = spans[j];
            if (!a.written || (b.written && j <= i)) continue;  // each pair of outputs once, not a with a
            if (a.first > b.last || b.first > a.last) continue;
            std::ostringstream s;
            s << a.name << " (bytes " << pointer_text(reinterpret_cast<const void*>(a.first)) << ".."
              << pointer_text(reinterpret_cast<const void*>(a.last)) << ") overlaps " << b.name << " (bytes "
              << pointer_text(reinterpret_cast<const void*>(b.first)) << ".."
              << pointer_text(reinterpret_cast<const void*>(b.last)) << "): an output may share no byte with "
              << (b.written ? "another output" : "an input");
            *message = s.str();
            return false;
        }
    return true;
}

namespace {

// The Extent of a tensor with `span_dims` for the overlap rule and `fit_dims` for the address
// space (the same dims but for a cache whose pages share rows).
Extent extent(int64_t elem_size, int64_t row, std::initializer_list<Dim> fit_dims, std::initializer_list<Dim> span_dims) {
    Extent e{false, 0, 0};
    if (row <= 0) return e;
    for (const Dim& d : fit_dims)
        if (d.count <= 0) return e;
    int64_t fit = 0, span = 0;
    const Dim* blamed = nullptr;
    // Validated params: neither offset overflows.
    last_element_offset(elem_size, row, fit_dims, &fit, &blamed);
    last_element_offset(elem_size, row, span_dims, &span, &blamed);
    e.any = true;
    e.last_element = static_cast<uint64_t>(fit);
    e.last_byte = static_cast<uint64_t>(span) + static_cast<uint64_t>(elem_size - 1);
    return e;
}

Extent cache_extent(const wideattn_prefill_params& p, int64_t elem_size, Dim block, Dim slot, Dim head) {
    std::string why;
    if (rows_nest("cache rows", "head_dim", p.head_dim, {block, slot, head}, &why))
        return extent(elem_size, p.head_dim, {block, slot, head}, {block, slot, head});
    return extent(elem_size, p.head_dim, {block, slot, head}, {block, head});
}

}  // namespace

PrefillExtents prefill_extents(const wideattn_prefill_params& p) {
    const int64_t q_size = dtype_size(p.q_dtype), kv_size = dtype_size(p.kv_dtype), o_size = dtype_size(p.o_dtype);
    const int64_t lse_size = p.o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    const Dim q_token{"total_q", p.total_q, "q_token_stride", p.q_token_stride};
    const Dim q_head{"num_q_heads", p.num_q_heads, "q_head_stride", p.q_head_stride};
    const Dim o_token{"total_q", p.total_q, "o_token_stride", p.o_token_stride};
    const Dim o_head{"num_q_heads", p.num_q_heads, "o_head_stride", p.o_head_stride};
    const Dim lse_head{"num_q_heads", p.num_q_heads, "lse_head_stride", p.lse_head_stride};
    PrefillExtents e{};
    e.q = extent(q_size, p.head_dim, {q_token, q_head}, {q_token, q_head});
    e.o = extent(o_size, p.head_dim, {o_token, o_head}, {o_token, o_head});
    e.lse = extent(lse_size, p.total_q, {lse_head}, {lse_head});
    e.k_cache = cache_extent(p, kv_size, {"num_blocks", p.num_blocks, "k_block_stride", p.k_block_stride},
                             {"block_size", p.block_size, "k_slot_stride", p.k_slot_stride},
                             {"num_kv_heads", p.num_kv_heads, "k_head_stride", p.k_head_stride});
    if (v_transposed(p)) {
        const Dim block{"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride};
        const Dim head{"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride};
        const Dim dim{"head_dim", p.head_dim, "block_size", p.block_size};
        e.v_cache = extent(kv_size, p.block_size, {block, head, dim}, {block, head, dim});
    } else {
        e.v_cache = cache_extent(p, kv_size, {"num_blocks", p.num_blocks, "v_block_stride", p.v_block_stride},
                                 {"block_size", p.block_size, "v_slot_stride", p.v_slot_stride},
                                 {"num_kv_heads", p.num_kv_heads, "v_head_stride", p.v_head_stride});
    }
    return e;
}

std::string past_address_space(const char* name, const void* base, uint64_t last_element) {
    std::ostringstream s;
    s << name << "=" << pointer_text(base) << " plus the " << last_element
      << " bytes to its last element runs past the end of the 64-bit address space";
    return s.str();
}

}  // namespace wideattn
