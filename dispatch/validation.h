// validation.h - the host-side argument checks of wideattn_prefill / wideattn_is_supported,
// wideattn_quantize_to_cache, wideattn_compute_scale and wideattn_k_from_v_rebuild. No driver,
// no I/O: unit-testable on any machine. Kernel selection and launch geometry are in selection.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wideattn.h"

namespace wideattn {

constexpr uintptr_t kTensorAlignment = 16;  // q, K/V caches, o, workspace: 16-byte vector loads and cp.async

// A pointer as the refusals print it ("%p").
std::string pointer_text(const void* ptr);

// Bytes per element of a wideattn_dtype (0 for an unknown value).
int32_t dtype_size(int32_t dtype);

// Checks every argument that can be checked on the host. On failure returns
// WIDEATTN_ERROR_INVALID_ARGUMENT and sets *message, naming the argument and its value.
wideattn_status validate_params(const wideattn_prefill_params* p, std::string* message);

// The K-from-V description of params (WIDEATTN_FLAG_K_FROM_V) read as a versioned struct into
// *out (zeroed for a call without the flag, WIDEATTN_OK); INVALID_ARGUMENT naming the field for a
// NULL pointer or a struct_size this library cannot read. validate_params checks the values.
wideattn_status read_k_from_v(const wideattn_prefill_params& p, wideattn_k_from_v* out, std::string* message);

// The same for wideattn_plan_create: q, k_cache, v_cache and o may be NULL (a run gives them);
// every other rule holds, the tensors' shapes and strides included.
wideattn_status validate_plan_params(const wideattn_prefill_params* p, std::string* message);

// The bytes first..last (inclusive) of one tensor for the overlap rule; `written`: an output.
struct Span {
    const char* name;
    uintptr_t first, last;
    bool written;
};

// The spans of validated params' tensors, in this order where present: o, lse, workspace, q,
// k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table, q_scale, k_scale, v_scale (a tensor
// without elements or with a NULL base has none). Appends to *spans.
void prefill_spans(const wideattn_prefill_params& p, std::vector<Span>* spans);

// Whether no output span shares a byte with another span (outputs with outputs, outputs with
// inputs; inputs may share bytes). Otherwise false and *message names both and their bytes, as
// validate_params does. Allocates only to build the message.
bool spans_apart(const Span* spans, size_t count, std::string* message);

// Where a tensor of validated params ends, from its base: the offset of its last element (the
// address-space rule of validate_params: base + last_element must not wrap) and of the last byte
// its span covers (the overlap rule). `any` is false for a tensor without elements.
struct Extent {
    bool any;
    uint64_t last_element;
    uint64_t last_byte;
};
struct PrefillExtents {
    Extent q, k_cache, v_cache, o, lse;
};
PrefillExtents prefill_extents(const wideattn_prefill_params& p);

// The refusal of a base whose tensor's last element, `last_element` bytes on, runs past the end
// of the address space (validate_params' message for it).
std::string past_address_space(const char* name, const void* base, uint64_t last_element);

// The same for wideattn_quantize_to_cache: INVALID_ARGUMENT (also for a src_dtype that is no
// wideattn_dtype), or UNSUPPORTED for a wideattn_dtype no kernel takes as its source.
wideattn_status validate_quantize_params(const wideattn_quantize_params* p, std::string* message);

// The same for wideattn_k_from_v_rebuild: params validated as validate_params does, then a
// K-from-V call over a BF16 or E4M3 V cache in the engine layout, and `out` read as a versioned
// struct into *out_copy and checked (caches, strides, table, extents, overlaps with params).
wideattn_status validate_k_from_v_rebuild(const wideattn_prefill_params* p, const wideattn_k_from_v_rebuild_out* out,
                                          wideattn_k_from_v_rebuild_out* out_copy, std::string* message);
// The same for wideattn_compute_scale (the per-tensor amax kernel).
wideattn_status validate_scale_params(const wideattn_scale_params* p, std::string* message);

}  // namespace wideattn
