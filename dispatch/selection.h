// selection.h - the pure functions behind wideattn_prefill and wideattn_is_supported: kernel
// selection and launch geometry (the argument checks before them: validation.h). No driver,
// no I/O: unit-testable on any machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dispatch/manifest.h"
#include "wideattn.h"

namespace wideattn {

// A device's compute capability as messages name it: "sm_90" for 9.0, and "compute capability
// -1.0 (not valid)" where no sm_ name exists (a negative part, or a minor above 9).
std::string device_arch_text(int32_t cc_major, int32_t cc_minor);

// Whether a cubin built for `kernel.arch` runs on a device of compute capability major.minor.
bool arch_runs_on(const ManifestKernel& kernel, int32_t cc_major, int32_t cc_minor);

// Picks the kernel for already validated params on a cc_major.cc_minor device: of the kernels
// whose dtypes, head dim, group and features fit, each represented by its cubin whose arch is
// closest to the device, the one of highest priority (that cubin's manifest priority). A
// non-empty `only_name` naming a prefill kernel that takes p's q/kv/o dtypes considers kernels of
// that name alone (wideattn_set_prefill_kernel); for other dtypes it has no effect. A non-empty
// `preferred` (the tuning file's choice for the call's shape class, dispatch/tuning.h) is taken
// instead of the highest priority when it fits; `only_name` wins over it. Returns WIDEATTN_OK and
// *index, or WIDEATTN_ERROR_UNSUPPORTED with *message saying what is missing.
wideattn_status select_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_prefill_params& p,
                              int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message,
                              const std::string& only_name = std::string(),
                              const std::string& preferred = std::string());

// Whether the manifest has a prefill kernel called `name` (any arch).
bool has_prefill_kernel(const std::vector<ManifestKernel>& kernels, const std::string& name);

// Launch geometry of docs/design.md / kernel_desc.h for a selected kernel.
// grid_z: the key splits of a split-KV launch (1 otherwise).
struct LaunchGeometry {
    uint32_t grid_x = 0, grid_y = 0, grid_z = 1, block_x = 0;
    uint32_t dynamic_smem = 0;
};
LaunchGeometry launch_geometry(const ManifestKernel& kernel, const wideattn_prefill_params& p);

// The merge kernel of a split-KV call (kind "merge_splits") for p's o_dtype and head_dim whose
// grid fits, closest to the device; WIDEATTN_ERROR_UNSUPPORTED with *message when none does.
wideattn_status select_merge_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_prefill_params& p,
                                    int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message);
// Its grid: one block per tile.tokens (rows per block) of the total_q x num_q_heads rows.
LaunchGeometry merge_launch_geometry(const ManifestKernel& kernel, const wideattn_prefill_params& p);

// The same for wideattn_quantize_to_cache (validated by validate_quantize_params): kernel
// choice and grid.
wideattn_status select_quantize_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_quantize_params& p,
                                       int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message);
LaunchGeometry quantize_launch_geometry(const ManifestKernel& kernel, const wideattn_quantize_params& p);

// The same for wideattn_compute_scale (the per-tensor amax kernel, one without the feature
// power_of_two) and for wideattn_compute_scale_pow2 (one with it).
wideattn_status select_scale_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                    int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message);
wideattn_status select_scale_pow2_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                         int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message);
LaunchGeometry scale_launch_geometry(const ManifestKernel& kernel, const wideattn_scale_params& p);

// The same for wideattn_k_from_v_rebuild (validated by validate_k_from_v_rebuild): the closest
// cubin of kind "k_from_v_rebuild" serving head_dim; its grid walks num_seqs x the pages both
// tables' rows address, at most kMaxGridX blocks in grid.x (the kernel's traits), grid-stride,
// each block every KV head of its page.
wideattn_status select_k_from_v_rebuild_kernel(const std::vector<ManifestKernel>& kernels,
                                               const wideattn_prefill_params& p, int32_t cc_major, int32_t cc_minor,
                                               int32_t* index, std::string* message);
LaunchGeometry k_from_v_rebuild_launch_geometry(const ManifestKernel& kernel, const wideattn_prefill_params& p,
                                                const wideattn_k_from_v_rebuild_out& out);

// The device-independent part of the quantise and scale selections, checked before the driver
// is needed: when the bundle's kernels of the call's kind and src_dtype that serve its head_dim
// (any arch) would all need more than 65535 blocks in grid.y for heads x head_dim,
// WIDEATTN_ERROR_INVALID_ARGUMENT with *message naming heads, head_dim and the most heads that
// fit; WIDEATTN_OK otherwise (a missing kernel, arch or head dim is left to the selection,
// WIDEATTN_ERROR_UNSUPPORTED).
wideattn_status check_quantize_grid(const std::vector<ManifestKernel>& kernels, const wideattn_quantize_params& p,
                                    std::string* message);
wideattn_status check_scale_grid(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                 std::string* message);

}  // namespace wideattn
