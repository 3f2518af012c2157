/*
 * wideattn.h - the C API of libwideattn: attention kernels for wide heads (head dim 512).
 *
 * A host engine opens a context on a kernel bundle (cubins + manifest.json), fills a
 * wideattn_prefill_params struct with device pointers and strides, and calls
 * wideattn_prefill() on its own CUDA stream. The library resolves the CUDA driver at run
 * time (dlopen), so it loads on machines without a driver and reports that from a launch.
 *
 * Every call returns a wideattn_status; on failure wideattn_last_error() returns a message
 * (thread-local, valid until the next call on the same thread) naming the offending
 * argument and its value.
 *
 * This header is also included by the device kernels: the params struct is the exact
 * kernel argument (passed by value), so host and device share one definition.
 */
#ifndef WIDEATTN_H
#define WIDEATTN_H

#include <stddef.h>
#include <stdint.h>

/* WIDEATTN_API marks the exported functions (default visibility in the shared library). */
#if defined(__GNUC__)
#define WIDEATTN_API __attribute__((visibility("default")))
#else
#define WIDEATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* C API version of this header (= the project version; wideattn_version() returns the version
 * of the loaded library as text). 0.2.0 (42f2241) inserted the split-KV fields into
 * wideattn_prefill_params (232 -> 264 bytes: rebuild against the new header); 0.3.0 (9ecdd9c)
 * renamed its last field `reserved` to `flags` (same offset and size); 0.4.0 added the transposed
 * e4m3 V layout (WIDEATTN_FLAG_V_TRANSPOSED), appended `flags` to wideattn_quantize_params
 * (104 -> 112 bytes: rebuild against the new header), added plans (wideattn_plan_create /
 * wideattn_plan_run, below) and moved this header from dispatch/ to include/; 0.5.0 added K from V
 * (WIDEATTN_FLAG_K_FROM_V, wideattn_k_from_v) and appended `k_from_v` to wideattn_prefill_params
 * (264 -> 272 bytes; read only when flags has WIDEATTN_FLAG_K_FROM_V, so a caller built against
 * 0.4.0 keeps working); 0.6.0 appended `inv_freq` to wideattn_k_from_v (32 -> 40 bytes; a 0.5.0
 * caller's 32-byte struct is still accepted, its inv_freq taken as NULL); 0.7.0 appended
 * `cos_sin`, `cos_sin_positions` and `reserved2` to wideattn_k_from_v (40 -> 56 bytes; 32- and
 * 40-byte structs are still accepted, without a table); 0.8.0 added wideattn_k_from_v_rebuild
 * (K from V rebuilt into a K + V cache: the prefill path of K from V); 0.9.0 added
 * wideattn_compute_scale_pow2 (the per-tensor e4m3 scale rounded up to a power of two). The shared library's
 * soname is libwideattn.so.<MAJOR>. */
#define WIDEATTN_VERSION_MAJOR 0
#define WIDEATTN_VERSION_MINOR 9
#define WIDEATTN_VERSION_PATCH 0

/* Status codes. */
typedef enum wideattn_status {
    WIDEATTN_OK = 0,
    WIDEATTN_ERROR_INVALID_ARGUMENT = 1, /* a parameter is null, misaligned, out of range... */
    WIDEATTN_ERROR_UNSUPPORTED = 2,      /* no kernel in the bundle for this device/shape/dtype */
    WIDEATTN_ERROR_NO_DRIVER = 3,        /* libcuda.so.1 could not be loaded or is incomplete */
    WIDEATTN_ERROR_NO_DEVICE = 4,        /* the driver reports no usable device or context */
    WIDEATTN_ERROR_BUNDLE = 5,           /* manifest or cubin missing, unreadable or corrupt */
    WIDEATTN_ERROR_CUDA = 6,             /* a CUDA driver call failed (message has the code) */
    WIDEATTN_ERROR_INTERNAL = 7          /* an unexpected failure inside the library, e.g. out of
                                            host memory; no C++ exception ever reaches the caller */
} wideattn_status;

/* Element types. Values are stable: they appear in the manifest and in kernel arguments. */
typedef enum wideattn_dtype {
    WIDEATTN_DTYPE_BF16 = 0, /* bfloat16: q, k/v and o of the bf16 kernels, the quantise sources */
    WIDEATTN_DTYPE_F16 = 1,  /* IEEE binary16 (the manifest knows it; no bundled kernel takes it) */
    WIDEATTN_DTYPE_F32 = 2,  /* float: amax_e4m3's scale output, the split-KV merge's partials */
    WIDEATTN_DTYPE_F64 = 3,  /* double: o (and lse) of the fp64 reference kernel */
    WIDEATTN_DTYPE_E4M3 = 4  /* 8-bit float codes (e4m3, OCP FP8 E4M3FN: max 448), dequantised as
                                code * the tensor's scale */
} wideattn_dtype;

/*
 * K from V (C API 0.5.0, inv_freq 0.6.0, cos_sin 0.7.0; docs/design.md section 2, "K from V in
 * Gemma 4's global layers"): the cache holds V only and each key's K is rebuilt from its V row, as
 * Gemma 4's global layers (attention_k_eq_v) define them: V = bf16(n), K = RoPE(bf16(n * w)) with
 * n the RMS-normalised projection and w k_norm's weight. Per key j of a sequence (position j, its index
 * in the sequence) and dim d of head_dim D, all arithmetic fp32 and each named step rounded to
 * bf16:
 *   x[d]       = bf16(V[d] * k_norm_scale[d])
 *   inv_freq[i]= the caller's table inv_freq[i] when given, else 1 / fp32(rope_theta ^ (2i / D)),
 *                for i < rotary_dims / 2; 0 for the rest (i < D / 2)
 *   c[i], s[i] = bf16(cos(fp32(j * inv_freq[i]))), bf16(sin(...)), or the cos_sin table's entry
 *                [j][i] when one is given and j < cos_sin_positions
 *   K[d]       = bf16(bf16(x[d] * c[d]) - bf16(x[d + D/2] * s[d]))       for d <  D/2
 *   K[d]       = bf16(bf16(x[d] * c[i]) + bf16(x[d - D/2] * s[i]))       for d >= D/2, i = d - D/2
 * (rotate-half pairing: dim i turns with dim i + D/2; the exponent's denominator is the full head
 * dim D, as transformers' "proportional" RoPE has it). Gemma 4's global layers: rope_theta 1e6,
 * rotary_dims 128 (partial_rotary_factor 0.25 of D = 512). For cos / sin with the same bits as
 * transformers', pass the model's own frequencies in inv_freq: torch computes theta ^ (2i / D) with
 * its fp32 pow, which is not correctly rounded, and the formula's power (fp64 rounded once) differs
 * from it in 1 of the 256 entries for theta 1e6, D 512 (measured 2026-12-02, torch 2.11).
 * A versioned struct (struct_size, see "Versioned structs" below: 32, the C API 0.5.0 size without
 * inv_freq, 40, the 0.6.0 size without cos_sin, or 56; a size between two of them is refused)
 * pointed to by wideattn_prefill_params.k_from_v; the library passes a copy to the kernels, so it
 * need not outlive the call (a plan keeps its own copy; the tables themselves are read by the
 * kernels and must live while they run).
 */
#define WIDEATTN_ROPE_PROPORTIONAL 1 /* wideattn_k_from_v.rope_type: the one RoPE type defined */
#define WIDEATTN_ROPE_ROTATE_HALF 1  /* wideattn_k_from_v.pairing: dim i with dim i + head_dim / 2 */
typedef struct wideattn_k_from_v {
    uint32_t struct_size;      /* sizeof(wideattn_k_from_v) */
    int32_t rope_type;         /* WIDEATTN_ROPE_PROPORTIONAL */
    const float* k_norm_scale; /* device, fp32 [head_dim]: k_norm's weight w itself (not 1 + w);
                                  4-byte aligned */
    float rope_theta;          /* > 0 and finite (Gemma 4 global layers: 1e6); not used, and not
                                  checked, when inv_freq is given */
    int32_t rotary_dims;       /* dims that rotate: even, 0 .. head_dim; 2 x the frequencies with a
                                  nonzero inv_freq (partial_rotary_factor x head_dim: 128 for Gemma 4) */
    int32_t pairing;           /* WIDEATTN_ROPE_ROTATE_HALF */
    int32_t reserved;          /* 0 */
    const float* inv_freq;     /* C API 0.6.0. device, fp32 [rotary_dims / 2], 4-byte aligned: the
                                  first rotary_dims / 2 entries of the model's inv_freq (transformers'
                                  rotary buffer, e.g. Gemma4TextRotaryEmbedding's
                                  full_attention_inv_freq), used as they are; the frequencies from
                                  rotary_dims / 2 on stay 0. NULL: computed from rope_theta as above
                                  (also what a 32-byte struct of C API 0.5.0 means). */
    const void* cos_sin;       /* C API 0.7.0. device, 8-byte aligned, NULL or a table of
                                  [cos_sin_positions][rotary_dims / 2] (cos, sin) pairs of bf16
                                  (4 bytes an entry, cos first): for a key at position j <
                                  cos_sin_positions, c[i], s[i] above ARE entry [j][i] (the formula's
                                  angle, cos and sin are not evaluated); keys at positions from
                                  cos_sin_positions on take the formula. Needs rotary_dims a multiple
                                  of 4 (rows of whole 8-byte pairs of frequencies). The kernels then
                                  read 256 bytes a key (Gemma 4) instead of evaluating 64 cos / sin:
                                  the decode kernels' cheapest K build. wideattn_k_from_v_cos_sin
                                  fills one with the formula's values (outputs bit-identical to a
                                  call without it); an engine may instead store its model's own
                                  cos / sin (transformers' rotary embedding output cast to bf16). */
    int32_t cos_sin_positions; /* rows of cos_sin: 0 when it is NULL, else 1 .. 2^31 - 1 */
    int32_t reserved2;         /* 0 */
} wideattn_k_from_v;

/*
 * Fills the HOST buffer `out` with the cos / sin table of wideattn_k_from_v.cos_sin for positions
 * 0 .. positions - 1 (C API 0.7.0): entry [j][i] (4 bytes at out + 4 * (j * rotary_dims / 2 + i),
 * the bf16 cos in its low half, the bf16 sin in its high half) is cos / sin of the fp32 angle
 * fp32(j * f[i]), where f[i] = inv_freq[i] when inv_freq is not NULL (a HOST array of
 * rotary_dims / 2 floats: the model's frequencies, as wideattn_k_from_v.inv_freq takes them on the
 * device) and else 1 / fp32(rope_theta ^ (2i / head_dim)), the formula above. cos and sin are
 * evaluated as the K-from-V decode kernels evaluate them (rope_cos_sin_reduced in
 * kernels/common/k_from_v.h, the same bits on the host and the device), so a call whose
 * description holds this table (copied to the device) and the same inv_freq or rope_theta gives
 * outputs bit-identical to the same call without a table, for angles up to 2^18 rad (every
 * position below 262144 at frequencies <= 1, as Gemma 4's); past that the kernels and this
 * function take cosf / sinf of their own machine, whose bf16 results may differ at rare rounding
 * ties. The fp64 reference kernel and the CPU reference read a table too; without one they
 * evaluate cosf / sinf, so their outputs with and without this table may differ at rare ties.
 * 256 bytes a position for Gemma 4's rotary_dims 128 (64 MiB for 262144 positions); one table
 * serves every layer and head that shares the frequencies.
 * Checks: head_dim even and > 0; rotary_dims a multiple of 4 in 4 .. head_dim; positions >= 1;
 * out not NULL and out_bytes >= positions * rotary_dims / 2 * 4; rope_theta finite and > 0 when
 * inv_freq is NULL (not read otherwise). Any other value: WIDEATTN_ERROR_INVALID_ARGUMENT naming
 * it, and `out` untouched. Needs no context, driver or GPU; the work grows with positions x
 * rotary_dims / 2 (each entry a few dozen fp32 operations).
 */
WIDEATTN_API wideattn_status wideattn_k_from_v_cos_sin(float rope_theta, const float* inv_freq, int32_t head_dim,
                                                       int32_t rotary_dims, int32_t positions, void* out,
                                                       size_t out_bytes);

/*
 * Prefill attention over a variable-length batch with a paged KV cache.
 *
 * Semantics (see docs/design.md section 2):
 *   - sequence s owns query tokens cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 (q_len of them)
 *     and sees seq_lens_k[s] keys (cached context + its q_len new tokens);
 *   - causal, bottom-right aligned: query i (0-based within the sequence) sees keys
 *     0 .. seq_lens_k[s] - q_len + i;
 *   - query head h reads KV head h / (num_q_heads / num_kv_heads);
 *   - key j of sequence s lives in physical block block_table[s * block_table_stride +
 *     j / block_size], slot j % block_size;
 *   - o = softmax(scale * q k^T) v, accumulated in fp32 (fp64 for the reference kernel);
 *     a row with no visible key is written as zeros and its LSE as -infinity.
 *
 * All strides are in elements of the tensor's own dtype; the head dimension is contiguous
 * (stride 1). Pointers are device pointers. The struct is plain data: zero-initialise it,
 * fill what you use, and pass it to wideattn_prefill().
 *
 * Outputs never alias: the bytes of o, lse and workspace (each from its base to its last
 * element, as the strides and counts place it; the workspace's workspace_bytes) may share no
 * byte with one another nor with an input (q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, the
 * block_table rows, the scales), else WIDEATTN_ERROR_INVALID_ARGUMENT names both and their byte
 * ranges. Inputs may share bytes (k_cache == v_cache, K and V interleaved per block in one
 * allocation, q/k/v rows of one projection); a tensor without elements (total_q 0, lse NULL) has
 * none. A cache whose pages share rows (a block stride below one block's rows, as dense K/V rows
 * described as pages of 16 rows starting at any row) counts up to its last block's first slot.
 */
typedef struct wideattn_prefill_params {
    /* q[token][q_head][d], token in 0 .. total_q-1. 16-byte aligned. */
    const void* q;
    int64_t q_token_stride;
    int64_t q_head_stride;

    /* k_cache[block][slot][kv_head][d] and the same for v_cache. 16-byte aligned. */
    const void* k_cache;
    int64_t k_block_stride;
    int64_t k_slot_stride;
    int64_t k_head_stride;
    const void* v_cache;
    int64_t v_block_stride;
    int64_t v_slot_stride;
    int64_t v_head_stride;

    /* o[token][q_head][d]. 16-byte aligned. Every element is written. */
    void* o;
    int64_t o_token_stride;
    int64_t o_head_stride;

    /* Optional log-sum-exp (natural log, of the scaled scores) lse[q_head][token]:
     * float, or double when o_dtype is F64. NULL to skip. */
    void* lse;
    int64_t lse_head_stride;

    /* int32 cu_seqlens_q[num_seqs + 1] (cu_seqlens_q[0] = 0, cu_seqlens_q[num_seqs] =
     * total_q, non-decreasing) and seq_lens_k[num_seqs] (>= the sequence's q_len). */
    const int32_t* cu_seqlens_q;
    const int32_t* seq_lens_k;

    /* int32 block_table[num_seqs][block_table_stride]; a sequence with L keys uses its first
     * ceil(L / block_size) entries, each in 0 .. num_blocks-1. A contiguous KV tensor is the
     * identity table. */
    const int32_t* block_table;
    int64_t block_table_stride;

    /* Per-tensor dequantisation scales (device pointers to one float each) for the 8-bit
     * variants; NULL for 16-bit inputs (k_scale may be NULL with WIDEATTN_FLAG_K_FROM_V). */
    const float* q_scale;
    const float* k_scale;
    const float* v_scale;

    int32_t num_seqs;     /* >= 1 */
    int32_t total_q;      /* rows of q and o, = cu_seqlens_q[num_seqs]; >= 0 */
    int32_t num_q_heads;  /* multiple of num_kv_heads */
    int32_t num_kv_heads; /* >= 1 */
    int32_t head_dim;     /* 512 (the bundle's kernels say which head dims they serve) */
    int32_t block_size;   /* KV slots per block, a multiple of 16 */
    int32_t num_blocks;   /* physical blocks in k_cache/v_cache (bounds block_table values) */
    int32_t q_dtype;      /* wideattn_dtype */
    int32_t kv_dtype;     /* wideattn_dtype */
    int32_t o_dtype;      /* wideattn_dtype; F64 selects the fp64 reference kernel */
    float softmax_scale;  /* > 0 and finite; Gemma 4 uses 1.0 */

    /* Split-KV (decode and small batches, docs/design.md "Split-KV"): when a call has too few
     * (token tile, KV head) blocks to fill the GPU, each block's keys are split over num_splits
     * blocks that write fp32 partial O and LSE into `workspace`, and a second kernel merges them
     * into o and lse on the same stream (on sm_90 and later a programmatic dependent launch that
     * may start during the split kernel's tail: WIDEATTN_PDL). The split boundaries depend only
     * on the params and the device's SM count, so reruns are bit-identical; a different split
     * count changes the rounding (within the kernels' error bounds), never the semantics. */
    int32_t max_seqlen_q; /* hint: the largest q_len of the call, or 0 if unknown (>= 0). Hints
                             only steer the split count and, with total_q and num_seqs, whether
                             the call's shortest sequence is long enough for a many_tokens kernel
                             (the two-CTA prefill kernel); any value gives correct results */
    int32_t max_seqlen_k; /* hint: the largest seq_lens_k of the call, or 0 if unknown (>= 0) */
    int32_t num_splits;   /* 0: the library chooses (wideattn_plan_launch); 1: never split;
                             2 .. WIDEATTN_MAX_SPLITS: exactly that many (the workspace must
                             then hold them: WIDEATTN_ERROR_INVALID_ARGUMENT otherwise) */
    /* Caller-owned device scratch for the partial results, 16-byte aligned, or NULL with
     * workspace_bytes 0. Never allocated by the library, so a call stays capturable in a CUDA
     * graph. With num_splits 0 the library uses the most splits, up to its choice, that fit in
     * workspace_bytes (NULL: no split). Size it with wideattn_workspace_size (current device) or
     * wideattn_plan_launch; contents need no initialisation and are garbage afterwards. A
     * workspace may be reused by calls ordered on one stream, not by concurrent ones. */
    void* workspace;
    int64_t workspace_bytes;
    /* WIDEATTN_FLAG_* bits (0: none; an unknown bit is WIDEATTN_ERROR_INVALID_ARGUMENT). Named
     * `reserved` and required to be 0 before C API 0.3.0; same offset and size. */
    int32_t flags;
    /* With WIDEATTN_FLAG_K_FROM_V in flags: the K-from-V description (host pointer, above); k_cache
     * is then NULL and its strides are not read. Read only when that flag is set (C API 0.5.0), so
     * the 264 bytes of a 0.4.0 caller's struct are all that is read from it otherwise. */
    const wideattn_k_from_v* k_from_v;
} wideattn_prefill_params;

/*
 * Checked mode (wideattn_prefill_params.flags, or WIDEATTN_CHECK_METADATA=1 in the environment
 * when the context is opened): before launching, wideattn_prefill copies cu_seqlens_q,
 * seq_lens_k and the used prefix of every block_table row from the device (cuMemcpyDtoHAsync on
 * the caller's stream, then cuStreamSynchronize) and checks them on the host:
 *   - cu_seqlens_q[0] == 0, non-decreasing, every entry <= total_q, cu_seqlens_q[num_seqs] == total_q;
 *   - q_len <= seq_lens_k[s] <= block_table_stride * block_size for every sequence s;
 *   - block_table[s * block_table_stride + j] in 0 .. num_blocks-1 for j < ceil(seq_lens_k[s] /
 *     block_size).
 * The first bad entry fails the call with WIDEATTN_ERROR_INVALID_ARGUMENT naming the array,
 * sequence, index, value and rule; nothing is launched and the context keeps working. Without
 * the mode the kernels clamp bad lengths to what the table row can address and trust the
 * table entries (docs/design.md section 2). For debug builds of engines: the call waits for the
 * stream, so it is slow and cannot be captured in a CUDA graph (a call on a capturing stream is
 * refused before any copy). wideattn_is_supported, wideattn_plan_launch and
 * wideattn_workspace_size only validate the flag (they read no device memory).
 */
#define WIDEATTN_FLAG_CHECK_METADATA 1

/*
 * Transposed e4m3 V cache (wideattn_prefill_params.flags with kv_dtype E4M3, and
 * wideattn_quantize_params.flags for the step that writes it; docs/design.md "Transposed V"):
 * each (block, kv_head) page of v_cache holds its head_dim rows of block_size contiguous codes,
 *   v(block, slot, kv_head, d) = v_cache[block * v_block_stride + kv_head * v_head_stride +
 *                                        d * block_size + position(slot)],
 * v_slot_stride = 1, where the slots of each group of 16 are interleaved so that an FP8 P V
 * reads them in the order of the score accumulator:
 *   position(s) = 16 (s / 16) + 4 ((s / 2) % 4) + 2 ((s / 8) % 2) + s % 2.
 * K stays in the engine layout. Only the kernels with the "v_transposed" feature read it, and
 * they read nothing else; selection refuses the others for it (WIDEATTN_ERROR_UNSUPPORTED).
 */
#define WIDEATTN_FLAG_V_TRANSPOSED 2

/*
 * K from V (wideattn_prefill_params.flags, C API 0.5.0): k_cache is NULL and each key's K is
 * rebuilt from its V row as wideattn_k_from_v describes (params.k_from_v, required). Only the
 * kernels with the "k_from_v" feature serve it (the fp64 reference, reference_f64, over a bf16 V
 * cache; decode_e4m3kfv_d512 and decode_bf16kfv_d512 for single-token decode over an e4m3 or a
 * bf16 V cache); selection refuses the others for it (WIDEATTN_ERROR_UNSUPPORTED). kv_dtype BF16 or E4M3 (v_scale set; k_scale may be
 * NULL, and a set one is not read).
 */
#define WIDEATTN_FLAG_K_FROM_V 4

/* The largest num_splits (wideattn_prefill_params). */
#define WIDEATTN_MAX_SPLITS 128

/*
 * Quantise bf16 K or V (or any [token][head][d] tensor) to e4m3 into the paged KV-cache layout
 * (the "store K/V into the cache" step of an engine):
 *   cache[slot / block_size][slot % block_size][head][d] = e4m3(src[token][head][d] * (1 / *scale))
 * for slot = slot_mapping[token] >= 0; negative slots are padding and skipped. Rounds to
 * nearest even and saturates to +-448 (also when x / scale overflows float). NaN/inf inputs are
 * stored as e4m3 NaN and counted in *nonfinite_count (when not NULL), so the caller can detect
 * them instead of caching finite garbage. Dequantise as code * scale (the k_scale / v_scale /
 * q_scale of wideattn_prefill_params).
 *
 * Flat destination (Q in e4m3, or any dst[token][head][d]): slot_mapping = NULL means slot =
 * token (tokens must then be <= num_blocks * block_size). With block_size = 1 and num_blocks =
 * tokens, dst[token][head][d] is cache + token * cache_block_stride + head * cache_head_stride + d
 * (cache_slot_stride is then unused; set it to cache_block_stride).
 *
 * The scale can come from the data without a host round trip: wideattn_compute_scale on the
 * same stream first, then this call with the same scale pointer.
 *
 * The outputs, cache (its rows from base to last byte) and nonfinite_count, may share no byte
 * with each other nor with src, slot_mapping or scale (WIDEATTN_ERROR_INVALID_ARGUMENT naming both
 * and their byte ranges), as for wideattn_prefill_params.
 */
typedef struct wideattn_quantize_params {
    const void* src;               /* bf16 [tokens][heads][head_dim], 16-byte aligned */
    int64_t src_token_stride;      /* elements, multiples of 8 */
    int64_t src_head_stride;
    void* cache;                   /* e4m3 bytes, 8-byte aligned */
    int64_t cache_block_stride;    /* bytes, multiples of 8; the rows [block][slot][head] must not overlap */
    int64_t cache_slot_stride;
    int64_t cache_head_stride;
    const int64_t* slot_mapping;   /* int64 [tokens], device; NULL: slot = token (flat destination) */
    const float* scale;            /* device pointer to the dequantisation scale (> 0) */
    int32_t* nonfinite_count;      /* device int32 counter, incremented per NaN/inf input; may be NULL */
    int32_t tokens;                /* >= 0 */
    int32_t heads;                 /* >= 1; heads * head_dim within 65535 kernel blocks (below) */
    int32_t head_dim;              /* multiple of 8 */
    int32_t block_size;            /* >= 1 */
    int32_t num_blocks;            /* >= 1; slots >= num_blocks * block_size are skipped */
    int32_t src_dtype;             /* wideattn_dtype: BF16 (another dtype: WIDEATTN_ERROR_UNSUPPORTED;
                                      a value that is no wideattn_dtype: _INVALID_ARGUMENT) */
    int32_t flags;                 /* 0, or WIDEATTN_FLAG_V_TRANSPOSED: write the transposed V layout,
                                      cache[block][head][d][position(slot)] with byte strides
                                      cache_block_stride, cache_head_stride, block_size and
                                      cache_slot_stride = 1 (block_size a multiple of 16, a slot
                                      mapping given); since C API 0.4.0 */
} wideattn_quantize_params;

/*
 * Per-tensor e4m3 scale of a bf16 [token][head][d] tensor, computed on the device:
 *   *scale = max(amax / 448, 2^-126), amax = max |x| over the finite inputs,
 * so the largest value maps onto e4m3's 448. The floor 2^-126 (the smallest normal float) is
 * what an all-zero tensor gets (also an empty one, tokens = 0, or one whose inputs are all
 * NaN/inf): never 0, never non-finite, and 1 / scale stays finite, so its codes are exact zeros.
 * NaN/inf inputs are left out of the max and counted in *nonfinite_count (when not NULL) like
 * wideattn_quantize_to_cache counts them; a caller passing the same counter to both calls sees
 * each such input twice. Tokens whose slot_mapping entry is negative (padding) are skipped;
 * slot_mapping NULL reads every token. The fields mean what they mean in wideattn_quantize_params.
 *
 * Deterministic: the call sets *scale to 2^-126 (an asynchronous memset on `stream`), then one
 * kernel raises it with atomicMax on the float's bits; amax -> scale is monotonic and max is
 * order-independent, so the result is the same bits as the CPU reference in every run.
 * Capturable in a CUDA graph (a memset node and a kernel node). The outputs, scale and
 * nonfinite_count, may share no byte with each other nor with src or slot_mapping.
 */
typedef struct wideattn_scale_params {
    const void* src;               /* bf16 [tokens][heads][head_dim], 16-byte aligned */
    int64_t src_token_stride;      /* elements, multiples of 8 */
    int64_t src_head_stride;
    const int64_t* slot_mapping;   /* int64 [tokens], device; NULL: every token counts */
    float* scale;                  /* device float, written (4-byte aligned) */
    int32_t* nonfinite_count;      /* device int32 counter, incremented per NaN/inf input; may be NULL */
    int32_t tokens;                /* >= 0 */
    int32_t heads;                 /* >= 1; heads * head_dim as in wideattn_quantize_params */
    int32_t head_dim;              /* multiple of 8 */
    int32_t src_dtype;             /* wideattn_dtype: BF16 (as in wideattn_quantize_params) */
} wideattn_scale_params;

typedef struct wideattn_context wideattn_context;

/* Information about one kernel of the opened bundle (pointers live as long as the context). */
typedef struct wideattn_kernel_info {
    const char* name;     /* e.g. "reference_f64" */
    const char* symbol;   /* kernel symbol in the cubin */
    const char* arch;     /* e.g. "sm_90a" */
    const char* cubin;    /* file name inside the bundle directory */
    int32_t q_dtype, kv_dtype, o_dtype; /* wideattn_dtype of q, k/v and o (merge_splits: the f32
                                           partials twice, then o; quantize_e4m3: source, codes,
                                           codes; amax_e4m3: source, codes, scale) */
    int32_t head_dim_min, head_dim_max; /* supported head dims: multiples of head_dim_step */
    int32_t head_dim_step;
    int32_t group_min, group_max;      /* supported num_q_heads / num_kv_heads */
    int32_t tile_tokens;               /* query tokens per block */
    int32_t tile_keys;                 /* keys per inner-loop tile */
    int32_t heads_per_block_max;       /* query heads of one KV head per block */
    int32_t threads;                   /* threads per block */
    int32_t dynamic_smem;              /* bytes of dynamic shared memory */
    int32_t registers;                 /* from the build's ptxas report, -1 unknown */
    int32_t spill_bytes;               /* spill stores + loads from ptxas, -1 unknown */
    int32_t stack_bytes;               /* stack frame from ptxas, -1 unknown */
    const char* features;              /* comma-separated, e.g. "varlen,paged,causal,lse"; "tma_kv":
                                          K/V read through TMA tensor maps the library builds per
                                          call, so the kernel is skipped for caches whose strides
                                          do not nest (head <= slot <= block, each covering the
                                          dimension inside it); "split_kv": has the split-KV entry
                                          point (wideattn_prefill_params.num_splits); "k_from_v":
                                          rebuilds K from V (WIDEATTN_FLAG_K_FROM_V) */
    const char* kind;                  /* "prefill", "merge_splits" (the split-KV merge kernel),
                                          "quantize_e4m3" or "amax_e4m3" */
} wideattn_kernel_info;

/* Library version string, e.g. "0.4.0". */
WIDEATTN_API const char* wideattn_version(void);

/* Name of a status code, e.g. "WIDEATTN_ERROR_INVALID_ARGUMENT". */
WIDEATTN_API const char* wideattn_status_string(wideattn_status status);

/* Message of the last failed call on this thread ("" if none). */
WIDEATTN_API const char* wideattn_last_error(void);

/*
 * Opens a context on a bundle directory. bundle_dir NULL or "" means: the environment variable
 * WIDEATTN_BUNDLE if set and not empty, else the directory the library was installed with. Reads
 * and checks manifest.json and the tuning file (below), no cubin (WIDEATTN_ERROR_BUNDLE names the
 * file and field), so its cost grows with the manifest, not with the cubins. Each cubin is read,
 * checked against the manifest's size and checksum, and loaded into a CUDA context lazily, at the
 * first launch of its kernel in that context; a missing, truncated or corrupt cubin fails that
 * launch with WIDEATTN_ERROR_BUNDLE naming the file. Does not need a driver or a GPU. Reads the
 * environment variable WIDEATTN_CHECK_METADATA once: "1" puts every wideattn_prefill of the
 * context in checked mode (WIDEATTN_FLAG_CHECK_METADATA), unset, "" or "0" leaves it to each
 * call's flags; and WIDEATTN_PDL once: "0" launches the split-KV merge kernel plainly after the
 * split kernel, unset, "" or "1" as a programmatic dependent launch on sm_90 and later (the same
 * results; docs/design.md "Split-KV"). Any other value of either fails the open with
 * WIDEATTN_ERROR_INVALID_ARGUMENT naming the variable and its value.
 */
WIDEATTN_API wideattn_status wideattn_open(wideattn_context** ctx, const char* bundle_dir);

/* Closes a context (NULL is ignored). Loaded modules are unloaded and the context's plans
 * destroyed (their handles are refused from then on). The pointer is invalid
 * afterwards: closing it again, or any call with it, is undefined (the library cannot detect it),
 * as is closing a context while another thread still uses it. */
WIDEATTN_API void wideattn_close(wideattn_context* ctx);

/* Bundle directory the context was opened on. */
WIDEATTN_API const char* wideattn_bundle_dir(const wideattn_context* ctx);

/* Number of kernels in the bundle, and their descriptions (index 0 .. count-1). */
WIDEATTN_API int32_t wideattn_kernel_count(const wideattn_context* ctx);
WIDEATTN_API wideattn_status wideattn_get_kernel_info(const wideattn_context* ctx, int32_t index,
                                         wideattn_kernel_info* info);

/*
 * Whether the bundle has a kernel for these params on a device of compute capability
 * cc_major.cc_minor. Validates the params exactly as wideattn_prefill() does and runs the
 * same selection; never touches the driver. On WIDEATTN_OK, *kernel_index (if not NULL)
 * is the kernel that would run.
 */
WIDEATTN_API wideattn_status wideattn_is_supported(const wideattn_context* ctx,
                                      const wideattn_prefill_params* params, int cc_major,
                                      int cc_minor, int32_t* kernel_index);

/*
 * Restricts prefill kernel selection (wideattn_prefill, wideattn_is_supported) on this context
 * to the kernel called `name` for calls with the q/kv/o dtypes that kernel takes, e.g.
 * "mma_bf16_d512" to run the mma tier on an sm_90 device where the Hopper tier is chosen by
 * default (calls with other dtypes, such as the fp64 reference, select as usual; a call the
 * named kernel cannot serve fails with WIDEATTN_ERROR_UNSUPPORTED saying so). NULL or ""
 * restores automatic selection.
 * WIDEATTN_ERROR_INVALID_ARGUMENT (the message lists the bundle's prefill kernels) when the
 * bundle has no prefill kernel of that name. Launches that follow use the new setting; for
 * tests, benchmarks and comparisons between tiers.
 */
WIDEATTN_API wideattn_status wideattn_set_prefill_kernel(wideattn_context* ctx, const char* name);

/*
 * Tuning file: per shape class and q/kv dtypes, the prefill kernel `wideattn tune` measured
 * fastest on one device for one bundle (docs/design.md, "Tuning file"). wideattn_open reads the
 * file named by the environment variable WIDEATTN_TUNING (it must then exist; "off": no tuning
 * file), else (unset or "") tuning.json beside the bundle's manifest.json if there is one; an
 * unreadable or malformed file makes wideattn_open fail with WIDEATTN_ERROR_BUNDLE naming the
 * file. A file written for another bundle (its bundle checksum differs from
 * wideattn_bundle_checksum) is ignored; a choice naming a kernel the bundle lacks, or one that
 * does not take the choice's dtypes, is left out. The device is compared where it is known:
 * wideattn_prefill compares the current device's name and compute capability,
 * wideattn_is_supported the compute capability it is given; on a mismatch that call follows the
 * built-in priority order. A choice is followed only when its kernel serves the call (otherwise
 * the priority order decides); wideattn_set_prefill_kernel wins over the file. Shape classes,
 * from host-known values: decode (total_q <= 8 * num_seqs), prefill_short (total_q < 8192),
 * prefill_long (the rest); chunked prefill and mixed batches fall into these by total_q.
 */
typedef enum wideattn_tuning_state {
    WIDEATTN_TUNING_NONE = 0,    /* no tuning file: the built-in priority order */
    WIDEATTN_TUNING_READ = 1,    /* read and matches the bundle; no device compared yet */
    WIDEATTN_TUNING_ACTIVE = 2,  /* followed: matches the bundle and the device of the last selection */
    WIDEATTN_TUNING_IGNORED = 3  /* not followed: other bundle, or not the device of the last selection */
} wideattn_tuning_state;

/*
 * The tuning file's state (*state, a wideattn_tuning_state) and the reason, with the file's path,
 * as text into message[0 .. message_size-1] (NUL-terminated, cut to fit; message may be NULL when
 * message_size is 0). Returns the length of the whole text in *message_length when not NULL.
 */
WIDEATTN_API wideattn_status wideattn_tuning_status(const wideattn_context* ctx, int32_t* state, char* message,
                                                    size_t message_size, size_t* message_length);

/* The bundle's checksum: FNV-1a 64 of manifest.json's bytes, as 16 hex digits. */
WIDEATTN_API const char* wideattn_bundle_checksum(const wideattn_context* ctx);

/* The tuning file the context looked for ($WIDEATTN_TUNING or DIR/tuning.json). */
WIDEATTN_API const char* wideattn_tuning_path(const wideattn_context* ctx);

/*
 * What wideattn_prefill would launch for these params on a device of compute capability
 * cc_major.cc_minor with num_sms multiprocessors (>= 1). Validates the params and selects the
 * kernel exactly as wideattn_prefill and wideattn_is_supported do; never touches the driver.
 * Split rule (dispatch/split_plan.h, docs/design.md "Split-KV"): a kernel with the "split_kv"
 * feature splits when its blocks (token tiles x query-head groups, estimated from total_q,
 * num_seqs and max_seqlen_q) fill less than the machine; the count is the smallest that reaches
 * 95% of the best wave efficiency, at most WIDEATTN_MAX_SPLITS and at most one split per
 * WIDEATTN_MIN_SPLIT_KEYS keys of max_seqlen_k when that hint is given.
 */
#define WIDEATTN_MIN_SPLIT_KEYS 256
typedef struct wideattn_launch_plan {
    int32_t kernel_index;       /* the prefill kernel (wideattn_get_kernel_info index) */
    int32_t num_splits;         /* splits that run with the params' workspace as given; 1 = none. A
                                   forced num_splits is reported as it is: wideattn_prefill refuses
                                   it when workspace_bytes is below workspace_bytes here */
    int32_t merge_kernel_index; /* the kernel merging the splits; -1 when num_splits is 1 */
    int32_t preferred_splits;   /* splits the library would use given enough workspace */
    int64_t workspace_bytes;    /* workspace preferred_splits needs (0 when it is 1) */
} wideattn_launch_plan;

/* Fills *plan with what wideattn_prefill would launch for params on that device (see above). */
WIDEATTN_API wideattn_status wideattn_plan_launch(const wideattn_context* ctx, const wideattn_prefill_params* params,
                                                  int cc_major, int cc_minor, int num_sms,
                                                  wideattn_launch_plan* plan);

/*
 * The workspace bytes wideattn_prefill would like for these params on the calling thread's
 * current device (wideattn_plan_launch's workspace_bytes there; 0 when the call does not split).
 * Host-only: reads device attributes, never device memory, so it may run during a stream capture.
 */
WIDEATTN_API wideattn_status wideattn_workspace_size(const wideattn_context* ctx,
                                                     const wideattn_prefill_params* params, int64_t* bytes);

/*
 * Launches prefill attention on `stream` (a CUstream / cudaStream_t; NULL is the legacy
 * default stream) in the calling thread's current CUDA context. Asynchronous: returns
 * after the launch is queued. Thread-safe.
 */
WIDEATTN_API wideattn_status wideattn_prefill(wideattn_context* ctx, const wideattn_prefill_params* params,
                                 void* stream);

/*
 * Launches the e4m3 quantise-into-cache kernel (see wideattn_quantize_params) on `stream` in
 * the calling thread's current CUDA context. Validates every argument first, before the driver
 * is loaded, so bad input is WIDEATTN_ERROR_INVALID_ARGUMENT on any machine; that includes the
 * grid: heads * head_dim may cover at most 65535 blocks of the bundle's kernel (threads x
 * tile.keys elements each, 1024 for the bundled kernels: at most 67,107,840 elements per token).
 */
WIDEATTN_API wideattn_status wideattn_quantize_to_cache(wideattn_context* ctx, const wideattn_quantize_params* params,
                                                        void* stream);

/*
 * Computes a tensor's per-tensor e4m3 scale into *params->scale (see wideattn_scale_params) on
 * `stream` in the calling thread's current CUDA context. Validates every argument first, before
 * the driver is loaded, with the same grid limit as wideattn_quantize_to_cache.
 */
WIDEATTN_API wideattn_status wideattn_compute_scale(wideattn_context* ctx, const wideattn_scale_params* params,
                                                    void* stream);

/*
 * wideattn_compute_scale's scale rounded up to the smallest power of two at or above it (C API
 * 0.9.0): *scale = 2^ceil(log2(max(amax / 448, 2^-126))) up to 2^119 (an amax above 448 x 2^119,
 * about 2.98e38, keeps amax / 448: 2^120 would decode its largest codes to infinity), the same parameters, validation,
 * determinism (memset, then atomicMax of the rounded block scales: rounding up is monotonic) and
 * capture. With such a scale the largest |x| maps into [224, 448] instead of onto 448 (the codes
 * keep e4m3's relative precision) and code x scale is exact: decode_e4m3kfvb_d512 then rebuilds K
 * from an e4m3 V-only cache with one bf16 product a pair of dims (its product path; another scale
 * takes its fp32 steps). Runs the bundle's amax kernel with the feature
 * "power_of_two" (amax_e4m3_pow2); a bundle without one: WIDEATTN_ERROR_UNSUPPORTED.
 */
WIDEATTN_API wideattn_status wideattn_compute_scale_pow2(wideattn_context* ctx, const wideattn_scale_params* params,
                                                         void* stream);

/*
 * K from V rebuilt into a K + V cache (C API 0.8.0): the prefill path of WIDEATTN_FLAG_K_FROM_V.
 * The K-from-V kernels of the bundle serve single-token decode; a call with several query tokens
 * per sequence (a prompt, a chunk, a verify step) rebuilds the keys it reads once, into a bf16
 * K + V cache the caller owns (a scratch shared by the layers of a step), and runs as a plain
 * K + V call on it, on whichever prefill kernel the device has:
 *
 *   wideattn_k_from_v_rebuild(ctx, &params, &out, stream);   // params: the K-from-V call
 *   kv = params; kv.flags &= ~WIDEATTN_FLAG_K_FROM_V; kv.k_from_v = NULL;
 *   kv.k_cache = out.k_cache (and its strides); kv.v_cache = out.v_cache (and its strides);
 *   kv.block_table = out.block_table; kv.block_table_stride = out.block_table_stride;
 *   kv.num_blocks = out.num_blocks; kv.kv_dtype = WIDEATTN_DTYPE_BF16; kv.k_scale = kv.v_scale = NULL;
 *   wideattn_prefill(ctx, &kv, stream);
 *
 * For every sequence s, key j < L(s) and KV head h, with L(s) = seq_lens_k[s] clamped to 0 ..
 * the keys both tables' rows address (block_table_stride * block_size of params and of out):
 *   out.k_cache(page, j % block_size, h, :) = K of the key, the bf16 values the K-from-V decode
 *       kernels compute (kernels/common/k_from_v.h: bf16(V w), rotated with the table's cos / sin
 *       where params.k_from_v->cos_sin holds position j, else rope_cos_sin_reduced's), and
 *   out.v_cache(page, j % block_size, h, :) = its V as bf16 (a bf16 V cache: the same bits; e4m3:
 *       bf16(code * v_scale)),
 * where page = out.block_table[s * out.block_table_stride + j / block_size]. Nothing else of the
 * out caches is written: keys from L(s) on, and a page entry outside 0 .. out.num_blocks - 1
 * (its keys are skipped). A params block_table entry outside 0 .. num_blocks - 1 reads its V as
 * zeros (K and V written as zeros), as the attention kernels read such a page. Pages named by two
 * (sequence, index) pairs of out.block_table get one of the writes. params is validated as
 * wideattn_prefill validates a K-from-V call (q, o and lse are not read), kv_dtype BF16 or E4M3 in
 * the engine layout (not WIDEATTN_FLAG_V_TRANSPOSED); out's caches share no byte with each other
 * nor with an input of params or out's block_table. Checked mode (WIDEATTN_FLAG_CHECK_METADATA or
 * the environment) checks params' metadata as wideattn_prefill does. Bytes moved: the V read and
 * the K and V written, ~4 KiB a key and KV head for a bf16 V of head_dim 512.
 */
typedef struct wideattn_k_from_v_rebuild_out {
    uint32_t struct_size;        /* sizeof(wideattn_k_from_v_rebuild_out) (versioned struct, below) */
    int32_t reserved;            /* 0 */
    /* bf16 k_cache[block][slot][kv_head][d], 16-byte aligned, strides in elements (d contiguous),
     * each a multiple of 8; num_kv_heads and head_dim those of params, block_size too. */
    void* k_cache;
    int64_t k_block_stride;
    int64_t k_slot_stride;
    int64_t k_head_stride;
    /* bf16 v_cache, the same rules. */
    void* v_cache;
    int64_t v_block_stride;
    int64_t v_slot_stride;
    int64_t v_head_stride;
    /* int32 block_table[num_seqs][block_table_stride] of the out caches (num_seqs of params),
     * 4-byte aligned; the identity of a dense scratch is s * block_table_stride + j. */
    const int32_t* block_table;
    int64_t block_table_stride;  /* >= 1 */
    int32_t num_blocks;          /* pages in k_cache and v_cache (>= 1) */
    int32_t reserved2;           /* 0 */
} wideattn_k_from_v_rebuild_out;

/* Rebuilds the keys of a K-from-V call into out (above) on `stream` in the calling thread's
 * current CUDA context. Validates every argument first, before the driver is loaded. */
WIDEATTN_API wideattn_status wideattn_k_from_v_rebuild(wideattn_context* ctx, const wideattn_prefill_params* params,
                                                       const wideattn_k_from_v_rebuild_out* out, void* stream);

/*
 * Plans (C API 0.4.0): plan once per batch, run once per layer.
 *
 * A forward step runs the same attention metadata (cu_seqlens_q, seq_lens_k, block_table, the
 * shapes, strides, dtypes, scale, split hints and workspace) in every global layer, with only q,
 * the layer's K/V cache, o and lse changing. wideattn_plan_create does once what wideattn_prefill
 * does per call: validates the params, selects the kernel (pinning and tuning file as for
 * wideattn_prefill), chooses the split count for the workspace given, resolves the kernels in the
 * current CUDA context (loading their cubins on first use), precomputes the launch geometry and
 * the per-tensor extents, and encodes the K/V tensor maps of the caches it is given.
 * wideattn_plan_run then does the per-layer work only: cheap checks of the five pointers (set,
 * aligned, within the address space, outputs apart from every other tensor of the call), the
 * tensor maps (from the plan, else the context's bounded cache of encoded maps, else encoded and
 * cached), and one launch per kernel (cuLaunchKernelEx where the driver has it). It allocates no
 * host memory and throws nothing, and it can be captured in a CUDA graph (checked mode aside).
 *
 * Metadata values live on the device and may change between runs (a CUDA graph replays with new
 * contents); what the plan fixes is their pointers and every host-side value of the params.
 *
 * Handles are checked (docs/design.md, "Plans"): a wideattn_plan* is a token in a process-wide
 * registry, never dereferenced before it is found there. A destroyed plan, one whose context was
 * closed, a token the library never gave out, or a run in another CUDA context than the plan's is
 * refused with WIDEATTN_ERROR_INVALID_ARGUMENT naming the plan; never a crash. Destroying a plan
 * while another thread runs it is undefined, as is closing its context then.
 */
typedef struct wideattn_plan wideattn_plan;

/*
 * Versioned structs: the first field is struct_size, set it to sizeof(the struct) as your header
 * declares it. A library accepts the size of any of the struct's versions up to its own (fields
 * past what the caller's size covers take their default: 0 / NULL) and a larger one when every
 * byte past its own size is zero (a newer header's fields left unset); anything else (a size below
 * the first version's, or one between two versions' sizes, ending inside a field) is
 * WIDEATTN_ERROR_INVALID_ARGUMENT naming the struct, the size given and the sizes accepted.
 */

/* Options of wideattn_plan_create (NULL: all defaults). */
typedef struct wideattn_plan_options {
    uint32_t struct_size;          /* sizeof(wideattn_plan_options) (versioned struct, above) */
    uint32_t flags;                /* 0 (no option bit is defined yet; another bit is refused) */
    /* Caches the plan will run with, one K and one V base per entry (e.g. one per layer), each in
     * the layout the params describe: their tensor maps are encoded at creation and kept in the
     * plan (tma_kv kernels; ignored by the others). Other caches may still be passed to
     * wideattn_plan_run. At most WIDEATTN_PLAN_MAX_CACHES; NULL with num_caches 0. */
    int32_t num_caches;
    int32_t reserved;              /* 0 */
    const void* const* k_caches;   /* num_caches K cache bases (16-byte aligned) */
    const void* const* v_caches;   /* num_caches V cache bases */
} wideattn_plan_options;

/* The most caches wideattn_plan_options may list. */
#define WIDEATTN_PLAN_MAX_CACHES 1024

/* The size of each context's cache of encoded K/V tensor maps (keyed by base, dtype, shape and
 * strides; the least recently used entry is replaced when it is full). */
#define WIDEATTN_TENSOR_MAP_CACHE_ENTRIES 256

/*
 * Creates a plan for `params` on the calling thread's current CUDA context (which every run must
 * have current too). Validates params as wideattn_prefill does, except that q, k_cache, v_cache
 * and o may be NULL (they are given per run; when set here they are only checked, not kept). lse
 * decides whether the plan writes the LSE: a non-NULL lse here means every run passes one (and
 * lse_head_stride applies), NULL means every run passes NULL. The workspace (params.workspace,
 * workspace_bytes) and the metadata pointers are kept: each run uses them, so runs of one plan
 * are ordered on one stream or use plans with workspaces of their own. Checked mode
 * (WIDEATTN_FLAG_CHECK_METADATA, or the context's WIDEATTN_CHECK_METADATA=1) applies to every
 * run (which then waits for its stream). On WIDEATTN_OK *plan is the new plan; on failure *plan
 * is NULL and the status and message are those wideattn_prefill would give for the same params.
 */
WIDEATTN_API wideattn_status wideattn_plan_create(wideattn_context* ctx, const wideattn_prefill_params* params,
                                                  const wideattn_plan_options* options, wideattn_plan** plan);

/*
 * Runs a plan for one layer on `stream` (as wideattn_prefill does with the plan's params and
 * these tensors): q, k_cache, v_cache and o (16-byte aligned, in the plan's strides and shape)
 * and lse (NULL exactly when the plan was created without one). Refused with
 * WIDEATTN_ERROR_INVALID_ARGUMENT naming the argument: a NULL or misaligned pointer, an lse
 * that does not match the plan, a tensor that runs past the address space, an output sharing a
 * byte with another tensor of the call; and a plan that is not live or belongs to another CUDA
 * context (above). The caches are taken to have the plan's layout: wideattn_plan_run_tensors
 * also checks the layout the caller states.
 */
WIDEATTN_API wideattn_status wideattn_plan_run(const wideattn_plan* plan, const void* q, const void* k_cache,
                                               const void* v_cache, void* o, void* lse, void* stream);

/* The tensors of one run, with the caches' layout as the caller knows it, checked against the
 * plan's (0 in a layout field: not checked). */
typedef struct wideattn_plan_tensors {
    uint32_t struct_size;          /* sizeof(wideattn_plan_tensors) (versioned struct, above) */
    uint32_t reserved;             /* 0 */
    const void* q;
    const void* k_cache;
    const void* v_cache;
    void* o;
    void* lse;
    /* The caches' layout (elements; 0: not checked): a value that differs from the plan's params
     * is refused naming the field, the value given and the plan's. */
    int64_t k_block_stride, k_slot_stride, k_head_stride;
    int64_t v_block_stride, v_slot_stride, v_head_stride;
    int32_t num_blocks, block_size, num_kv_heads, head_dim;
    int32_t kv_dtype_plus_one;     /* kv_dtype + 1 (0: not checked) */
    int32_t reserved2;             /* 0 */
} wideattn_plan_tensors;

/* wideattn_plan_run with the tensors (and the caches' layout, checked) in a struct. */
WIDEATTN_API wideattn_status wideattn_plan_run_tensors(const wideattn_plan* plan, const wideattn_plan_tensors* tensors,
                                                       void* stream);

/* What a plan launches: the fields of wideattn_launch_plan for its params, and the shape of the
 * tensors a run takes. */
typedef struct wideattn_plan_info {
    uint32_t struct_size;          /* sizeof(wideattn_plan_info) (versioned struct, above) */
    uint32_t has_lse;              /* 1 when runs pass an lse */
    wideattn_launch_plan launch;   /* kernel, splits that run, merge kernel, preferred splits and
                                      their workspace bytes */
    int32_t num_cached_maps;       /* K/V caches whose tensor maps the plan holds */
    int32_t tma_kv;                /* 1 when the plan's kernel reads K/V through tensor maps */
    int32_t checked;               /* 1 when every run checks the metadata (checked mode) */
    int32_t reserved;
} wideattn_plan_info;

/* Fills *info (whose struct_size the caller sets) for a live plan. */
WIDEATTN_API wideattn_status wideattn_plan_get_info(const wideattn_plan* plan, wideattn_plan_info* info);

/* Destroys a plan (NULL is ignored). A second destroy, or a destroy of a token that is no live
 * plan, is refused with WIDEATTN_ERROR_INVALID_ARGUMENT (never a double free). wideattn_close
 * destroys the plans of its context. */
WIDEATTN_API wideattn_status wideattn_plan_destroy(wideattn_plan* plan);

#ifdef __cplusplus
}
#endif

#endif /* WIDEATTN_H */
