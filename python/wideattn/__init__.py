"""wideattn from Python: ahead-of-time compiled CUDA attention kernels for wide heads (head dim
512, GQA group 8: Gemma 4's global layers) through libwideattn (ctypes, no compile step).

Without torch and without a GPU: contexts on a bundle, kernels() and their KernelInfo, which
kernel a call would select and how it would split (Context.is_supported, Context.plan_launch),
plans (Context.plan, Plan.run: plan once per step, run per layer), the library version, debug
mode (set_debug).
With torch (imported on first use of these names): prefill, prefill_k_from_v (a V-only cache: K
rebuilt from V), k_from_v_rebuild (those keys rebuilt into a bf16 K + V cache), k_from_v_cos_sin
(its cos / sin table), varlen_attention, compute_scale, power_of_two_scale,
quantize_to_cache, quantize, the `wideattn::*` custom ops (wideattn.ops) and the reference
(wideattn.reference). transformers: wideattn.transformers.register().
"""

from . import errors
from .errors import (BundleError, CudaError, InternalError, InvalidArgumentError, LibraryNotFoundError, NoDeviceError,
                     NoDriverError, UnsupportedError, WideattnError)
from .library import Context, KernelInfo, LaunchPlan, Plan, PlanInfo, configure, debug_enabled, default_context, set_debug

try:
    from ._paths import VERSION as __version__
except ImportError:
    __version__ = "unknown"

# Names that need torch, resolved from their modules on first access.
_TORCH_NAMES = {
    "prefill": "attention",
    "prefill_k_from_v": "attention",
    "k_from_v_cos_sin": "attention",
    "k_from_v_rebuild": "attention",
    "varlen_attention": "attention",
    "compute_scale": "quantization",
    "power_of_two_scale": "quantization",
    "quantize_to_cache": "quantization",
    "quantize": "quantization",
}

__all__ = ["BundleError", "Context", "CudaError", "InternalError", "InvalidArgumentError", "KernelInfo", "LaunchPlan",
           "LibraryNotFoundError", "NoDeviceError", "NoDriverError", "Plan", "PlanInfo", "UnsupportedError", "WideattnError",
           "configure", "debug_enabled", "default_context", "errors", "kernels", "set_debug", "version"] + sorted(_TORCH_NAMES)


def kernels():
    """Every kernel of the default context's bundle (see Context.kernels)."""
    return default_context().kernels()


def version():
    """The version of the loaded libwideattn."""
    return default_context().library.version()


_SUBMODULES = ("attention", "ops", "quantization", "reference", "serving", "transformers")


def __getattr__(name):
    import importlib
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module_name = _TORCH_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'wideattn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value
    return value
