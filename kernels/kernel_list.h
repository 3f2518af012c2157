// kernel_list.h - every kernel of the bundle, as an X-macro over its traits struct.
// The manifest generator expands it to find a kernel's KernelDesc by name; adding a kernel
// means adding its traits here and its source to kernels/meson.build.
#pragma once

#include "fp8/mma_e4m3_d512/traits.h"
#include "fp8/quantize/amax_traits.h"
#include "fp8/quantize/quantize_traits.h"
#include "fp8/hopper_e4m3q_d512/traits.h"
#include "kernels/hopper/bf16_d512/traits.h"
#include "kernels/mma/bf16_d512/traits.h"
#include "kernels/reference/traits.h"

#define WIDEATTN_FOR_EACH_KERNEL(X) \
    X(::wideattn::fp8::AmaxE4m3Traits) \
    X(::wideattn::ReferenceF64Traits) \
    X(::wideattn::WgmmaBf16D512Traits) \
    X(::wideattn::MmaBf16D512Traits) \
    X(::wideattn::fp8::QuantizeE4m3Traits) \
    X(::wideattn::MmaE4m3D512Traits) \
    X(::wideattn::WgmmaE4m3QD512Traits) \
    X(::wideattn::MmaE4m3QD512Traits)
