// validation.h - the host-side argument checks of wideattn_prefill / wideattn_is_supported,
// wideattn_quantize_to_cache and wideattn_compute_scale. No driver, no I/O: unit-testable on
// any machine. Kernel selection and launch geometry are in selection.h.
#pragma once

#include <cstdint>
#include <string>

#include "wideattn.h"

namespace wideattn {

// Bytes per element of a wideattn_dtype (0 for an unknown value).
int32_t dtype_size(int32_t dtype);

// Checks every argument that can be checked on the host. On failure returns
// WIDEATTN_ERROR_INVALID_ARGUMENT and sets *message, naming the argument and its value.
wideattn_status validate_params(const wideattn_prefill_params* p, std::string* message);

// The same for wideattn_quantize_to_cache: INVALID_ARGUMENT (also for a src_dtype that is no
// wideattn_dtype), or UNSUPPORTED for a wideattn_dtype no kernel takes as its source.
wideattn_status validate_quantize_params(const wideattn_quantize_params* p, std::string* message);

// The same for wideattn_compute_scale (the per-tensor amax kernel).
wideattn_status validate_scale_params(const wideattn_scale_params* p, std::string* message);

}  // namespace wideattn
