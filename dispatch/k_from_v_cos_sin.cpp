// k_from_v_cos_sin.cpp - wideattn_k_from_v_cos_sin: fills K from V's cos / sin table
// (wideattn_k_from_v.cos_sin) on the host with the values the K-from-V decode kernels compute
// without one (rope_cos_sin_reduced of kernels/common/k_from_v.h), so a call with the table gives
// their outputs bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/c_boundary.h"
#include "kernels/common/k_from_v.h"
#include "wideattn.h"

namespace wideattn {
namespace {

// The arguments' refusal, naming the first one out of range; "" when every one is in range.
// *table_bytes: the table's size (set when the counts are in range).
std::string cos_sin_fill_error(float rope_theta, const float* inv_freq, int32_t head_dim, int32_t rotary_dims,
                               int32_t positions, const void* out, size_t out_bytes, size_t* table_bytes) {
    std::ostringstream s;
    if (head_dim < 1 || head_dim % 2 != 0) {
        s << "head_dim=" << head_dim << " must be even and > 0";
        return s.str();
    }
    if (rotary_dims < kCosSinRotaryDimsMultiple || rotary_dims % kCosSinRotaryDimsMultiple != 0 ||
        rotary_dims > head_dim) {
        s << "rotary_dims=" << rotary_dims << " must be a multiple of " << kCosSinRotaryDimsMultiple << " in "
          << kCosSinRotaryDimsMultiple << "..head_dim=" << head_dim
          << " (the table's rows hold whole 8-byte pairs of frequencies)";
        return s.str();
    }
    if (positions < 1) {
        s << "positions=" << positions << " must be >= 1";
        return s.str();
    }
    if (!inv_freq && (!std::isfinite(rope_theta) || rope_theta <= 0.0f)) {
        s << "rope_theta=" << rope_theta << " must be finite and > 0 (or pass the model's inv_freq)";
        return s.str();
    }
    if (!out) return "out is NULL (a host buffer of positions * rotary_dims / 2 * 4 bytes)";
    size_t entries = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(positions), static_cast<size_t>(rotary_dims / 2), &entries) ||
        __builtin_mul_overflow(entries, kCosSinEntryBytes, table_bytes)) {
        s << "positions=" << positions << " with rotary_dims=" << rotary_dims
          << " needs a table larger than the address space";
        return s.str();
    }
    if (out_bytes < *table_bytes) {
        s << "out_bytes=" << out_bytes << " is below the table's " << *table_bytes << " bytes (positions=" << positions
          << " x rotary_dims / 2=" << rotary_dims / 2 << " x " << kCosSinEntryBytes << ")";
        return s.str();
    }
    return "";
}

// Row by row: the frequencies once, then each position's entries.
void fill_cos_sin(float rope_theta, const float* inv_freq, int32_t head_dim, int32_t rotary_dims, int32_t positions,
                  unsigned char* out) {
    const int32_t frequencies = rotary_dims / 2;
    std::vector<float> freq(static_cast<size_t>(frequencies));
    for (int32_t i = 0; i < frequencies; ++i)
        freq[i] = inv_freq ? inv_freq[i] : rope_inv_freq(rope_theta, i, head_dim, rotary_dims);
    for (int32_t j = 0; j < positions; ++j) {
        unsigned char* row = out + static_cast<size_t>(j) * static_cast<size_t>(frequencies) * kCosSinEntryBytes;
        for (int32_t i = 0; i < frequencies; ++i) {
            const uint32_t bits = k_from_v_table_bits(rope_cos_sin_reduced(rope_angle(j, freq[i])));
            std::memcpy(row + static_cast<size_t>(i) * kCosSinEntryBytes, &bits, kCosSinEntryBytes);
        }
    }
}

}  // namespace
}  // namespace wideattn

extern "C" wideattn_status wideattn_k_from_v_cos_sin(float rope_theta, const float* inv_freq, int32_t head_dim,
                                                     int32_t rotary_dims, int32_t positions, void* out,
                                                     size_t out_bytes) {
    return wideattn::guarded("wideattn_k_from_v_cos_sin", [&] {
        size_t table_bytes = 0;
        const std::string error = wideattn::cos_sin_fill_error(rope_theta, inv_freq, head_dim, rotary_dims, positions,
                                                               out, out_bytes, &table_bytes);
        if (!error.empty()) return wideattn::fail(WIDEATTN_ERROR_INVALID_ARGUMENT, error);
        wideattn::fill_cos_sin(rope_theta, inv_freq, head_dim, rotary_dims, positions, static_cast<unsigned char*>(out));
        return WIDEATTN_OK;
    });
}
