// reference_cpu.cpp - the fp64 CPU reference attention (see reference_cpu.h).
#include "accuracy/reference_cpu.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "accuracy/bf16.h"
#include "kernels/common/k_from_v.h"

namespace wideattn::accuracy {
namespace {

double load_element(const void* base, int32_t dtype, int64_t index) {
    switch (dtype) {
        case WIDEATTN_DTYPE_BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
        case WIDEATTN_DTYPE_F32: return static_cast<const float*>(base)[index];
        case WIDEATTN_DTYPE_F64: return static_cast<const double*>(base)[index];
        default: return std::numeric_limits<double>::quiet_NaN();
    }
}

bool host_dtype_supported(int32_t dtype) {
    return dtype == WIDEATTN_DTYPE_BF16 || dtype == WIDEATTN_DTYPE_F32 || dtype == WIDEATTN_DTYPE_F64;
}

// The caller's K-from-V description as the library reads it: the bytes its struct_size covers, the
// fields past them zero (a 32-byte struct of C API 0.5.0 has no inv_freq, a 40-byte one of 0.6.0 no
// cos_sin table).
wideattn_k_from_v read_description(const wideattn_k_from_v* in) {
    uint32_t size = 0;
    std::memcpy(&size, in, sizeof size);
    wideattn_k_from_v out{};
    std::memcpy(static_cast<void*>(&out), in, std::min<size_t>(size, sizeof out));
    return out;
}

}  // namespace

void k_from_v_row(const float* v_row, const wideattn_k_from_v& kfv, int32_t head_dim, int32_t position,
                  float* k_row) {
    const int32_t half = head_dim / 2;
    for (int32_t i = 0; i < half; ++i) {
        const float x_lo = k_from_v_scaled(v_row[i], kfv.k_norm_scale[i]);
        const float x_hi = k_from_v_scaled(v_row[i + half], kfv.k_norm_scale[i + half]);
        const RopeCosSin cs = k_from_v_cos_sin(kfv, position, i, head_dim);
        k_row[i] = rope_rotate(x_lo, x_hi, cs, true);
        k_row[i + half] = rope_rotate(x_hi, x_lo, cs, false);
    }
}

std::string reference_attention_cpu(const wideattn_prefill_params& p, double* o, double* lse) {
    std::ostringstream err;
    const bool rebuild_k = k_from_v_call(p.flags);
    if (!p.q || (!rebuild_k && !p.k_cache) || !p.v_cache || !o || !p.cu_seqlens_q || !p.seq_lens_k || !p.block_table)
        return "reference_attention_cpu: a required pointer (q, k_cache, v_cache, o, cu_seqlens_q, "
               "seq_lens_k, block_table) is null";
    const wideattn_k_from_v kfv = rebuild_k && p.k_from_v ? read_description(p.k_from_v) : wideattn_k_from_v{};
    if (rebuild_k && (!kfv.k_norm_scale || p.kv_dtype != WIDEATTN_DTYPE_BF16 || p.head_dim % 2 != 0)) {
        err << "reference_attention_cpu: WIDEATTN_FLAG_K_FROM_V needs k_from_v and its k_norm_scale (host "
               "pointers), kv_dtype=bf16 and an even head_dim (kv_dtype="
            << p.kv_dtype << ", head_dim=" << p.head_dim << ")";
        return err.str();
    }
    if (!host_dtype_supported(p.q_dtype) || !host_dtype_supported(p.kv_dtype)) {
        err << "reference_attention_cpu: q_dtype=" << p.q_dtype << " / kv_dtype=" << p.kv_dtype
            << " not supported (BF16, F32, F64)";
        return err.str();
    }
    if (p.num_kv_heads < 1 || p.num_q_heads < p.num_kv_heads || p.num_q_heads % p.num_kv_heads) {
        err << "reference_attention_cpu: num_q_heads=" << p.num_q_heads
            << " is not a positive multiple of num_kv_heads=" << p.num_kv_heads;
        return err.str();
    }
    if (p.block_size < 1 || p.head_dim < 1 || p.num_seqs < 1) {
        err << "reference_attention_cpu: block_size=" << p.block_size << ", head_dim=" << p.head_dim
            << ", num_seqs=" << p.num_seqs << " must all be >= 1";
        return err.str();
    }
    const int group = p.num_q_heads / p.num_kv_heads;
    const int D = p.head_dim;
    if (p.cu_seqlens_q[0] != 0 || p.cu_seqlens_q[p.num_seqs] != p.total_q)
        return "reference_attention_cpu: cu_seqlens_q must start at 0 and end at total_q";
    for (int s = 0; s < p.num_seqs; ++s) {
        const int q_len = p.cu_seqlens_q[s + 1] - p.cu_seqlens_q[s];
        if (q_len < 0 || p.seq_lens_k[s] < q_len) {
            err << "reference_attention_cpu: sequence " << s << " has q_len=" << q_len
                << " and seq_lens_k=" << p.seq_lens_k[s] << " (need 0 <= q_len <= seq_lens_k)";
            return err.str();
        }
        const int used_blocks = (p.seq_lens_k[s] + p.block_size - 1) / p.block_size;
        if (used_blocks > p.block_table_stride) {
            err << "reference_attention_cpu: sequence " << s << " needs " << used_blocks
                << " blocks but block_table_stride=" << p.block_table_stride;
            return err.str();
        }
        for (int b = 0; b < used_blocks; ++b) {
            const int32_t block = p.block_table[s * p.block_table_stride + b];
            if (block < 0 || block >= p.num_blocks) {
                err << "reference_attention_cpu: block_table[" << s << "][" << b << "]=" << block
                    << " outside 0.." << p.num_blocks - 1;
                return err.str();
            }
        }
    }

    for (int s = 0; s < p.num_seqs; ++s) {
        const int q_begin = p.cu_seqlens_q[s];
        const int q_len = p.cu_seqlens_q[s + 1] - q_begin;
        const int num_keys = p.seq_lens_k[s];
        const int context = num_keys - q_len;
        for (int kv_head = 0; kv_head < p.num_kv_heads; ++kv_head) {
            Eigen::MatrixXd keys(num_keys, D), values(num_keys, D);
            std::vector<float> v_row(rebuild_k ? D : 0), k_row(rebuild_k ? D : 0);
            for (int j = 0; j < num_keys; ++j) {
                const int64_t block = p.block_table[s * p.block_table_stride + j / p.block_size];
                const int64_t slot = j % p.block_size;
                const int64_t k_offset = block * p.k_block_stride + slot * p.k_slot_stride + kv_head * p.k_head_stride;
                const int64_t v_offset = block * p.v_block_stride + slot * p.v_slot_stride + kv_head * p.v_head_stride;
                for (int d = 0; d < D; ++d) values(j, d) = load_element(p.v_cache, p.kv_dtype, v_offset + d);
                if (rebuild_k) {
                    for (int d = 0; d < D; ++d) v_row[d] = static_cast<float>(values(j, d));
                    k_from_v_row(v_row.data(), kfv, D, j, k_row.data());
                    for (int d = 0; d < D; ++d) keys(j, d) = k_row[d];
                } else {
                    for (int d = 0; d < D; ++d) keys(j, d) = load_element(p.k_cache, p.kv_dtype, k_offset + d);
                }
            }
            for (int g = 0; g < group; ++g) {
                const int head = kv_head * group + g;
                for (int i = 0; i < q_len; ++i) {
                    const int token = q_begin + i;
                    double* out_row = o + token * p.o_token_stride + head * p.o_head_stride;
                    const int visible = context + i + 1;  // keys 0 .. context + i
                    Eigen::VectorXd query(D);
                    const int64_t q_row = token * p.q_token_stride + head * p.q_head_stride;
                    for (int d = 0; d < D; ++d) query(d) = load_element(p.q, p.q_dtype, q_row + d);
                    if (visible <= 0) {
                        for (int d = 0; d < D; ++d) out_row[d] = 0.0;
                        if (lse) lse[head * p.lse_head_stride + token] = -std::numeric_limits<double>::infinity();
                        continue;
                    }
                    Eigen::VectorXd scores = (keys.topRows(visible) * query) * static_cast<double>(p.softmax_scale);
                    const double max_score = scores.maxCoeff();
                    Eigen::VectorXd weights = (scores.array() - max_score).exp().matrix();
                    const double total = weights.sum();
                    Eigen::VectorXd out = values.topRows(visible).transpose() * weights / total;
                    for (int d = 0; d < D; ++d) out_row[d] = out(d);
                    if (lse) lse[head * p.lse_head_stride + token] = max_score + std::log(total);
                }
            }
        }
    }
    return {};
}

}  // namespace wideattn::accuracy
