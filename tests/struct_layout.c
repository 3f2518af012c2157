/* struct_layout.c - prints the C compiler's sizeof and offsetof of every field of the C API's
 * structs (include/wideattn.h) as JSON; tests/python/test_package.py compares the Python
 * package's ctypes mirrors (python/wideattn/_capi.py, also the structs of
 * tools/bench/peers/wideattn_ctypes.py) with it field by field. */
#include <stddef.h>
#include <stdio.h>

#include "wideattn.h"

#define FIELD(type, name) printf("%s\"%s\": %zu", first ? "" : ", ", #name, offsetof(type, name)), first = 0
#define BEGIN(type) printf("%s\"%s\": {\"size\": %zu, \"fields\": {", any ? ", " : "", #type, sizeof(type)), first = 1, any = 1
#define END() printf("}}")

int main(void) {
    int first = 1, any = 0;
    printf("{");
    BEGIN(wideattn_prefill_params);
    FIELD(wideattn_prefill_params, q); FIELD(wideattn_prefill_params, q_token_stride);
    FIELD(wideattn_prefill_params, q_head_stride); FIELD(wideattn_prefill_params, k_cache);
    FIELD(wideattn_prefill_params, k_block_stride); FIELD(wideattn_prefill_params, k_slot_stride);
    FIELD(wideattn_prefill_params, k_head_stride); FIELD(wideattn_prefill_params, v_cache);
    FIELD(wideattn_prefill_params, v_block_stride); FIELD(wideattn_prefill_params, v_slot_stride);
    FIELD(wideattn_prefill_params, v_head_stride); FIELD(wideattn_prefill_params, o);
    FIELD(wideattn_prefill_params, o_token_stride); FIELD(wideattn_prefill_params, o_head_stride);
    FIELD(wideattn_prefill_params, lse); FIELD(wideattn_prefill_params, lse_head_stride);
    FIELD(wideattn_prefill_params, cu_seqlens_q); FIELD(wideattn_prefill_params, seq_lens_k);
    FIELD(wideattn_prefill_params, block_table); FIELD(wideattn_prefill_params, block_table_stride);
    FIELD(wideattn_prefill_params, q_scale); FIELD(wideattn_prefill_params, k_scale);
    FIELD(wideattn_prefill_params, v_scale); FIELD(wideattn_prefill_params, num_seqs);
    FIELD(wideattn_prefill_params, total_q); FIELD(wideattn_prefill_params, num_q_heads);
    FIELD(wideattn_prefill_params, num_kv_heads); FIELD(wideattn_prefill_params, head_dim);
    FIELD(wideattn_prefill_params, block_size); FIELD(wideattn_prefill_params, num_blocks);
    FIELD(wideattn_prefill_params, q_dtype); FIELD(wideattn_prefill_params, kv_dtype);
    FIELD(wideattn_prefill_params, o_dtype); FIELD(wideattn_prefill_params, softmax_scale);
    FIELD(wideattn_prefill_params, max_seqlen_q); FIELD(wideattn_prefill_params, max_seqlen_k);
    FIELD(wideattn_prefill_params, num_splits); FIELD(wideattn_prefill_params, workspace);
    FIELD(wideattn_prefill_params, workspace_bytes); FIELD(wideattn_prefill_params, flags);
    FIELD(wideattn_prefill_params, k_from_v);
    END();
    BEGIN(wideattn_k_from_v);
    FIELD(wideattn_k_from_v, struct_size); FIELD(wideattn_k_from_v, rope_type);
    FIELD(wideattn_k_from_v, k_norm_scale); FIELD(wideattn_k_from_v, rope_theta);
    FIELD(wideattn_k_from_v, rotary_dims); FIELD(wideattn_k_from_v, pairing); FIELD(wideattn_k_from_v, reserved);
    FIELD(wideattn_k_from_v, inv_freq); FIELD(wideattn_k_from_v, cos_sin); FIELD(wideattn_k_from_v, cos_sin_positions);
    FIELD(wideattn_k_from_v, reserved2);
    END();
    BEGIN(wideattn_k_from_v_rebuild_out);
    FIELD(wideattn_k_from_v_rebuild_out, struct_size); FIELD(wideattn_k_from_v_rebuild_out, reserved);
    FIELD(wideattn_k_from_v_rebuild_out, k_cache); FIELD(wideattn_k_from_v_rebuild_out, k_block_stride);
    FIELD(wideattn_k_from_v_rebuild_out, k_slot_stride); FIELD(wideattn_k_from_v_rebuild_out, k_head_stride);
    FIELD(wideattn_k_from_v_rebuild_out, v_cache); FIELD(wideattn_k_from_v_rebuild_out, v_block_stride);
    FIELD(wideattn_k_from_v_rebuild_out, v_slot_stride); FIELD(wideattn_k_from_v_rebuild_out, v_head_stride);
    FIELD(wideattn_k_from_v_rebuild_out, block_table); FIELD(wideattn_k_from_v_rebuild_out, block_table_stride);
    FIELD(wideattn_k_from_v_rebuild_out, num_blocks); FIELD(wideattn_k_from_v_rebuild_out, reserved2);
    END();
    BEGIN(wideattn_quantize_params);
    FIELD(wideattn_quantize_params, src); FIELD(wideattn_quantize_params, src_token_stride);
    FIELD(wideattn_quantize_params, src_head_stride); FIELD(wideattn_quantize_params, cache);
    FIELD(wideattn_quantize_params, cache_block_stride); FIELD(wideattn_quantize_params, cache_slot_stride);
    FIELD(wideattn_quantize_params, cache_head_stride); FIELD(wideattn_quantize_params, slot_mapping);
    FIELD(wideattn_quantize_params, scale); FIELD(wideattn_quantize_params, nonfinite_count);
    FIELD(wideattn_quantize_params, tokens); FIELD(wideattn_quantize_params, heads);
    FIELD(wideattn_quantize_params, head_dim); FIELD(wideattn_quantize_params, block_size);
    FIELD(wideattn_quantize_params, num_blocks); FIELD(wideattn_quantize_params, src_dtype);
    FIELD(wideattn_quantize_params, flags);
    END();
    BEGIN(wideattn_scale_params);
    FIELD(wideattn_scale_params, src); FIELD(wideattn_scale_params, src_token_stride);
    FIELD(wideattn_scale_params, src_head_stride); FIELD(wideattn_scale_params, slot_mapping);
    FIELD(wideattn_scale_params, scale); FIELD(wideattn_scale_params, nonfinite_count);
    FIELD(wideattn_scale_params, tokens); FIELD(wideattn_scale_params, heads);
    FIELD(wideattn_scale_params, head_dim); FIELD(wideattn_scale_params, src_dtype);
    END();
    BEGIN(wideattn_kernel_info);
    FIELD(wideattn_kernel_info, name); FIELD(wideattn_kernel_info, symbol); FIELD(wideattn_kernel_info, arch);
    FIELD(wideattn_kernel_info, cubin); FIELD(wideattn_kernel_info, q_dtype); FIELD(wideattn_kernel_info, kv_dtype);
    FIELD(wideattn_kernel_info, o_dtype); FIELD(wideattn_kernel_info, head_dim_min);
    FIELD(wideattn_kernel_info, head_dim_max); FIELD(wideattn_kernel_info, head_dim_step);
    FIELD(wideattn_kernel_info, group_min); FIELD(wideattn_kernel_info, group_max);
    FIELD(wideattn_kernel_info, tile_tokens); FIELD(wideattn_kernel_info, tile_keys);
    FIELD(wideattn_kernel_info, heads_per_block_max); FIELD(wideattn_kernel_info, threads);
    FIELD(wideattn_kernel_info, dynamic_smem); FIELD(wideattn_kernel_info, registers);
    FIELD(wideattn_kernel_info, spill_bytes); FIELD(wideattn_kernel_info, stack_bytes);
    FIELD(wideattn_kernel_info, features); FIELD(wideattn_kernel_info, kind);
    END();
    BEGIN(wideattn_launch_plan);
    FIELD(wideattn_launch_plan, kernel_index); FIELD(wideattn_launch_plan, num_splits);
    FIELD(wideattn_launch_plan, merge_kernel_index); FIELD(wideattn_launch_plan, preferred_splits);
    FIELD(wideattn_launch_plan, workspace_bytes);
    END();
    BEGIN(wideattn_plan_options);
    FIELD(wideattn_plan_options, struct_size); FIELD(wideattn_plan_options, flags);
    FIELD(wideattn_plan_options, num_caches); FIELD(wideattn_plan_options, reserved);
    FIELD(wideattn_plan_options, k_caches); FIELD(wideattn_plan_options, v_caches);
    END();
    BEGIN(wideattn_plan_tensors);
    FIELD(wideattn_plan_tensors, struct_size); FIELD(wideattn_plan_tensors, reserved);
    FIELD(wideattn_plan_tensors, q); FIELD(wideattn_plan_tensors, k_cache); FIELD(wideattn_plan_tensors, v_cache);
    FIELD(wideattn_plan_tensors, o); FIELD(wideattn_plan_tensors, lse);
    FIELD(wideattn_plan_tensors, k_block_stride); FIELD(wideattn_plan_tensors, k_slot_stride);
    FIELD(wideattn_plan_tensors, k_head_stride); FIELD(wideattn_plan_tensors, v_block_stride);
    FIELD(wideattn_plan_tensors, v_slot_stride); FIELD(wideattn_plan_tensors, v_head_stride);
    FIELD(wideattn_plan_tensors, num_blocks); FIELD(wideattn_plan_tensors, block_size);
    FIELD(wideattn_plan_tensors, num_kv_heads); FIELD(wideattn_plan_tensors, head_dim);
    FIELD(wideattn_plan_tensors, kv_dtype_plus_one); FIELD(wideattn_plan_tensors, reserved2);
    END();
    BEGIN(wideattn_plan_info);
    FIELD(wideattn_plan_info, struct_size); FIELD(wideattn_plan_info, has_lse); FIELD(wideattn_plan_info, launch);
    FIELD(wideattn_plan_info, num_cached_maps); FIELD(wideattn_plan_info, tma_kv);
    FIELD(wideattn_plan_info, checked); FIELD(wideattn_plan_info, reserved);
    END();
    printf("}\n");
    return 0;
}
