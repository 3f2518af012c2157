"""The C++ op wideattn_cpp::prefill_packed (cpp_ops.cpp beside this file): wideattn::prefill_packed's
CUDA path without Python on a call whose plan is cached, built on demand with
torch.utils.cpp_extension against the torch in use (a C++17 compiler, the CUDA toolkit's headers
and ninja; the first build takes about a minute, later loads reuse torch's extension cache,
$TORCH_EXTENSIONS_DIR).

    load(verbose=False, build_directory=None)  builds if needed, loads, configures; returns the module
    load_or_warn()                             load(), a failure only warned (what $WIDEATTN_CPP_OPS=1 runs)
    loaded()                                   whether it is loaded
    stats()                                    {"plans", "hits", "misses"} of its handle table

Once loaded, wideattn.prefill's eager calls without lse and scales (the calls that use
wideattn::prefill_packed) use torch.ops.wideattn_cpp.prefill_packed instead: the same schema and
results, the plans of ops.plans (the C++ side keeps plan key -> handle and sends unseen keys, debug
mode and CUDA-graph capture to ops._packed_cuda_handle). torch.compile keeps wideattn::prefill. The
op's CPU implementation is wideattn::prefill_packed's (the reference); it has no fake
implementation (it is for eager calls); call it only with the arguments wideattn::prefill_packed
takes.
"""

import os
import threading
import warnings

import torch

from . import library
from . import ops

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp_ops.cpp")
MODULE_NAME = "wideattn_cpp_ops"

_state = {"module": None}
_lock = threading.Lock()


def loaded():
    """Whether the C++ op is loaded (and used by the Python entry points)."""
    return _state["module"] is not None


def load(verbose=False, build_directory=None):
    """Builds (when torch's extension cache has no current build) and loads the C++ op, hands it the
    slow path and debug mode, and makes the Python entry points call it; returns the extension
    module. verbose prints the build's commands; build_directory (None: torch's extension cache)
    is where the build goes. Raises RuntimeError when CUDA is not available or the source is
    missing, and what torch.utils.cpp_extension raises when the build fails."""
    with _lock:
        if _state["module"] is not None:
            return _state["module"]
        if not torch.cuda.is_available():
            raise RuntimeError("wideattn.cpp_ops.load: torch sees no CUDA device (the op is CUDA-only)")
        if not os.path.isfile(SOURCE):
            raise RuntimeError(f"wideattn.cpp_ops.load: the source {SOURCE} is missing")
        from torch.utils import cpp_extension
        module = cpp_extension.load(name=MODULE_NAME, sources=[SOURCE], extra_cflags=["-O2", "-std=c++17"],
                                    with_cuda=True, verbose=verbose, build_directory=build_directory)
        module.configure(ops._packed_cuda_handle, ops._packed_cpu)
        module.set_debug(library.debug_enabled())
        library.plan_close_hooks.append(module.clear)
        library.debug_hooks.append(module.set_debug)
        ops._prefill_packed_op = torch.ops.wideattn_cpp.prefill_packed.default
        _state["module"] = module
        return module


def load_or_warn():
    """load(), with a failure turned into a RuntimeWarning (the Python op stays in use)."""
    try:
        load()
    except Exception as error:  # the build's errors are of many kinds; the Python op still works
        warnings.warn(f"wideattn: the C++ op was not loaded ({type(error).__name__}: {error}); "
                      "the Python op stays in use", RuntimeWarning, stacklevel=2)


def stats():
    """{"plans": handles kept, "hits", "misses"} of the loaded C++ op; raises RuntimeError when it is
    not loaded."""
    if _state["module"] is None:
        raise RuntimeError("wideattn.cpp_ops.stats: the C++ op is not loaded (wideattn.cpp_ops.load)")
    return dict(_state["module"].stats())

