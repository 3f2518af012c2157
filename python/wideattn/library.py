"""Loading libwideattn and contexts on a kernel bundle: kernel listing and inspection, kernel
pinning, and the raw launches the torch layer calls. Standard library only: works without torch
and without a GPU or driver (the library loads the driver at the first launch).

The library is the first of: the `library` argument, $WIDEATTN_LIB, the location meson recorded
when it configured this copy of the package (the build tree's libwideattn.so, or the installed
one). The bundle: the `bundle` argument, $WIDEATTN_BUNDLE, the build tree's bundle for
the build-tree copy; the installed copy leaves it to the library (its installed bundle).
"""

import ctypes
import dataclasses
import os
import threading
import weakref

from . import _capi
from . import errors

try:
    from . import _paths
except ImportError:  # the source tree itself: no configured locations
    _paths = None

ENV_LIBRARY = "WIDEATTN_LIB"
ENV_BUNDLE = "WIDEATTN_BUNDLE"
ENV_DEBUG = "WIDEATTN_DEBUG"

_loaded = {}
_load_lock = threading.Lock()


def library_candidates(library=None):
    """The paths tried for libwideattn, in order, each as (path, where it came from): the
    `library` argument (a path, or None), $WIDEATTN_LIB, the location meson recorded."""
    candidates = []
    if library:
        candidates.append((os.fspath(library), "the library argument"))
    if os.environ.get(ENV_LIBRARY):
        candidates.append((os.environ[ENV_LIBRARY], "$" + ENV_LIBRARY))
    if _paths is not None and _paths.LIBRARY:
        candidates.append((_paths.LIBRARY, f"the {_paths.LOCATION} location recorded by meson"))
    return candidates


def default_bundle(bundle=None):
    """The bundle directory to open: the `bundle` argument (a path, or None), $WIDEATTN_BUNDLE,
    the configured one, or None (the library's installed bundle)."""
    if bundle:
        return os.fspath(bundle)
    if os.environ.get(ENV_BUNDLE):
        return os.environ[ENV_BUNDLE]
    if _paths is not None and _paths.BUNDLE:
        return _paths.BUNDLE
    return None


class Library:
    """One loaded libwideattn (a ctypes.CDLL with every function declared), loaded from `path`
    after checking that the ctypes struct mirrors have the C sizes."""

    def __init__(self, path):
        _capi.check_sizes()
        self.path = os.path.abspath(path)
        self.cdll = ctypes.CDLL(self.path)
        _capi.declare(self.cdll)

    def version(self):
        """The library's version string (wideattn_version), e.g. "0.8.0"."""
        return self.cdll.wideattn_version().decode()

    def k_from_v_cos_sin(self, rope_theta, inv_freq, head_dim, rotary_dims, positions, out, out_bytes):
        """Fills the host buffer at address `out` (out_bytes bytes) with the cos / sin table of
        wideattn_k_from_v.cos_sin for positions 0 .. positions - 1 (wideattn_k_from_v_cos_sin):
        from inv_freq (the address of a host float32 array of rotary_dims / 2 entries) when not
        None, else from rope_theta and head_dim; raises the library's error (nothing written)."""
        self.check("wideattn_k_from_v_cos_sin", self.cdll.wideattn_k_from_v_cos_sin(
            float(rope_theta), inv_freq, int(head_dim), int(rotary_dims), int(positions), out, int(out_bytes)))

    def check(self, call, status):
        """Raises the WideattnError subclass of a non-OK `status` (a wideattn_status) with the
        library's message, naming `call` (the function that returned it); returns for OK."""
        if status != _capi.STATUS_OK:
            name = self.cdll.wideattn_status_string(status)
            message = self.cdll.wideattn_last_error()
            raise errors.from_status(call, status, name.decode() if name else f"status {status}",
                                     message.decode(errors="replace") if message else "")


def load_library(library=None):
    """The Library of the first candidate of library_candidates(`library`) (loaded once per
    path). The argument and $WIDEATTN_LIB are taken as given: a missing file there is an error
    (LibraryNotFoundError), not a reason to look further."""
    candidates = library_candidates(library)
    if not candidates:
        raise errors.LibraryNotFoundError(
            "wideattn", f"libwideattn not found: no library argument, no ${ENV_LIBRARY}, no configured location")
    path, origin = candidates[0]
    if not os.path.exists(path):
        raise errors.LibraryNotFoundError("wideattn", f"libwideattn not found: {path} ({origin}): no such file")
    key = os.path.abspath(path)
    with _load_lock:
        if key not in _loaded:
            try:
                _loaded[key] = Library(key)
            except OSError as error:
                raise errors.LibraryNotFoundError("wideattn", f"cannot load {path} ({origin}): {error}")
        return _loaded[key]


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    """One kernel entry of a bundle (wideattn_kernel_info; dtypes as names)."""

    index: int
    name: str
    kind: str
    arch: str
    symbol: str
    cubin: str
    q_dtype: str
    kv_dtype: str
    o_dtype: str
    head_dim: tuple    # (min, max, step)
    group: tuple       # (min, max) of num_q_heads / num_kv_heads
    tile_tokens: int
    tile_keys: int
    heads_per_block_max: int
    threads: int
    dynamic_smem: int
    registers: int     # from the build's ptxas report; -1 unknown
    spill_bytes: int   # ptxas spill stores + spill loads (inspect shows them apart); -1 unknown
    stack_bytes: int
    features: tuple

    def __repr__(self):
        head_dim = self.head_dim[0] if self.head_dim[0] == self.head_dim[1] else \
            f"{self.head_dim[0]}..{self.head_dim[1]}/{self.head_dim[2]}"
        group = self.group[0] if self.group[0] == self.group[1] else f"{self.group[0]}..{self.group[1]}"
        return (f"KernelInfo({self.name!r}, kind={self.kind!r}, arch={self.arch!r}, "
                f"dtypes={self.q_dtype}/{self.kv_dtype}/{self.o_dtype}, head_dim={head_dim}, group={group})")


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """What wideattn_prefill would launch for one call (wideattn_launch_plan)."""

    kernel_index: int        # the prefill kernel (Context.kernels() index)
    num_splits: int          # splits that run with the params' workspace as given; 1 = none
    merge_kernel_index: int  # the kernel merging the splits; -1 when num_splits is 1
    preferred_splits: int    # splits the library would use given enough workspace
    workspace_bytes: int     # workspace preferred_splits needs (0 when it is 1)


def _kernel_info(index, raw):
    def text(value):
        return value.decode() if value else ""

    def dtype(value):
        return _capi.DTYPE_NAMES.get(value, str(value))

    return KernelInfo(
        index=index, name=text(raw.name), kind=text(raw.kind), arch=text(raw.arch), symbol=text(raw.symbol),
        cubin=text(raw.cubin), q_dtype=dtype(raw.q_dtype), kv_dtype=dtype(raw.kv_dtype),
        o_dtype=dtype(raw.o_dtype), head_dim=(raw.head_dim_min, raw.head_dim_max, raw.head_dim_step),
        group=(raw.group_min, raw.group_max), tile_tokens=raw.tile_tokens, tile_keys=raw.tile_keys,
        heads_per_block_max=raw.heads_per_block_max, threads=raw.threads, dynamic_smem=raw.dynamic_smem,
        registers=raw.registers, spill_bytes=raw.spill_bytes, stack_bytes=raw.stack_bytes,
        features=tuple(f for f in text(raw.features).split(",") if f))


def _check_params(call, params, struct=_capi.PrefillParams, name="params"):
    """Refuses `params` that is not a `struct` (the call's _capi parameter struct; ctypes would
    raise a TypeError naming neither the call nor the argument), naming the argument `name`."""
    if not isinstance(params, struct):
        raise errors.invalid_argument(call, f"{name} must be a wideattn._capi.{struct.__name__}, got "
                                            f"{type(params).__name__}")


def _capability(call, capability):
    """(major, minor) of `capability` as ints, or InvalidArgumentError naming it."""
    if (not isinstance(capability, (tuple, list)) or len(capability) != 2 or
            not all(isinstance(part, int) and not isinstance(part, bool) for part in capability)):
        raise errors.invalid_argument(call, f"capability must be (major, minor), e.g. (9, 0), got {capability!r}")
    return capability


class Context:
    """A wideattn_context on one bundle: its kernels, kernel pinning and the launches.

    `bundle`: the bundle directory (default_bundle: None means $WIDEATTN_BUNDLE, the configured
    one, or the library's installed bundle); `library`: the libwideattn to load (load_library).
    Opening reads and checks the manifest and needs no driver or GPU. Thread-safe like the
    library; close() (or a with block) releases the modules it loaded.
    """

    def __init__(self, bundle=None, library=None):
        self.library = load_library(library)
        self._lib = self.library.cdll
        self._handle = ctypes.c_void_p()
        path = default_bundle(bundle)
        self.library.check("wideattn_open", self._lib.wideattn_open(
            ctypes.byref(self._handle), os.path.abspath(path).encode() if path else None))
        self._kernels = None
        self._prefill = self._lib.wideattn_prefill
        self._workspace_size = self._lib.wideattn_workspace_size
        self._quantize = self._lib.wideattn_quantize_to_cache
        self._scale = self._lib.wideattn_compute_scale
        self._scale_pow2 = self._lib.wideattn_compute_scale_pow2
        self._rebuild = self._lib.wideattn_k_from_v_rebuild
        self._prefill_only = None         # the kernel set_prefill_kernel pinned (None: automatic choice)
        self._plans = weakref.WeakSet()   # the live plans, destroyed by close() before the context

    def close(self):
        """Closes the context (wideattn_close) and unloads its modules; later calls raise
        InvalidArgumentError. Closing twice is harmless."""
        if self._handle:
            for plan in list(self._plans):
                plan.close()
            self._lib.wideattn_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()

    def _require_open(self, call):
        if not self._handle:
            raise errors.invalid_argument(call, "the context is closed")

    @property
    def bundle_dir(self):
        """The bundle directory the context opened (wideattn_bundle_dir)."""
        self._require_open("wideattn.Context.bundle_dir")
        return self._lib.wideattn_bundle_dir(self._handle).decode()

    def kernels(self):
        """Every kernel of the bundle (one entry per kernel and arch), in manifest order."""
        self._require_open("wideattn.Context.kernels")
        if self._kernels is None:
            result = []
            for index in range(self._lib.wideattn_kernel_count(self._handle)):
                raw = _capi.KernelInfoStruct()
                self.library.check("wideattn_get_kernel_info",
                                   self._lib.wideattn_get_kernel_info(self._handle, index, ctypes.byref(raw)))
                result.append(_kernel_info(index, raw))
            self._kernels = tuple(result)
        return list(self._kernels)

    def set_prefill_kernel(self, name):
        """Restricts prefill selection to the kernel `name` for the dtypes it takes; None restores
        the automatic choice (wideattn_set_prefill_kernel)."""
        self._require_open("wideattn.Context.set_prefill_kernel")
        if name is not None and not isinstance(name, str):
            raise errors.invalid_argument("wideattn.Context.set_prefill_kernel",
                                          f"name must be a kernel name (str) or None, got {type(name).__name__}")
        self.library.check("wideattn_set_prefill_kernel", self._lib.wideattn_set_prefill_kernel(
            self._handle, name.encode() if name else None))
        self._prefill_only = name or None

    @property
    def prefill_kernel(self):
        """The name of the prefill kernel set_prefill_kernel pinned on this context, or None (the
        automatic choice)."""
        self._require_open("wideattn.Context.prefill_kernel")
        return self._prefill_only

    def is_supported(self, params, capability):
        """The KernelInfo that would run `params` (a _capi.PrefillParams) on a device of compute
        capability (major, minor); raises the library's error when none would. Needs no driver."""
        self._require_open("wideattn.Context.is_supported")
        _check_params("wideattn.Context.is_supported", params)
        index = ctypes.c_int32(-1)
        major, minor = _capability("wideattn.Context.is_supported", capability)
        self.library.check("wideattn_is_supported", self._lib.wideattn_is_supported(
            self._handle, ctypes.byref(params), int(major), int(minor), ctypes.byref(index)))
        return self.kernels()[index.value]

    def plan_launch(self, params, capability, num_sms):
        """The LaunchPlan of `params` on a device of compute capability (major, minor) with
        num_sms multiprocessors (wideattn_plan_launch); validates like is_supported. Needs no driver."""
        self._require_open("wideattn.Context.plan_launch")
        _check_params("wideattn.Context.plan_launch", params)
        raw = _capi.LaunchPlan()
        major, minor = _capability("wideattn.Context.plan_launch", capability)
        self.library.check("wideattn_plan_launch", self._lib.wideattn_plan_launch(
            self._handle, ctypes.byref(params), int(major), int(minor), int(num_sms), ctypes.byref(raw)))
        return LaunchPlan(raw.kernel_index, raw.num_splits, raw.merge_kernel_index, raw.preferred_splits,
                          raw.workspace_bytes)

    def workspace_size(self, params):
        """The workspace bytes wideattn_prefill would like for `params` on the calling thread's
        current device (wideattn_workspace_size: device attributes only, capture-safe)."""
        self._require_open("wideattn.Context.workspace_size")
        _check_params("wideattn.Context.workspace_size", params)
        size = ctypes.c_int64(0)
        status = self._workspace_size(self._handle, ctypes.byref(params), ctypes.byref(size))
        if status:
            self.library.check("wideattn_workspace_size", status)
        return size.value

    def launch_prefill(self, params, stream):
        """Queues wideattn_prefill of `params` (a _capi.PrefillParams) on `stream` (an integer
        CUstream handle, 0 = legacy default); raises the library's error."""
        self._require_open("wideattn.Context.launch_prefill")
        _check_params("wideattn.Context.launch_prefill", params)
        status = self._prefill(self._handle, ctypes.byref(params), stream)
        if status:
            self.library.check("wideattn_prefill", status)

    def plan(self, params, caches=None):
        """A Plan of `params` (a _capi.PrefillParams: the step's metadata, shapes, strides,
        workspace; q, k_cache, v_cache and o may be 0) on the calling thread's current CUDA context
        (wideattn_plan_create): validated, selected, split and resolved once, then run per layer.
        `caches`: optional (k_cache, v_cache) pointer pairs (one per layer) whose tensor maps are
        encoded now. Raises the library's error (the params' refusal, or no driver)."""
        self._require_open("wideattn.Context.plan")
        _check_params("wideattn.Context.plan", params)
        options = None
        keep = None
        if caches:
            pairs = [(int(k), int(v)) for k, v in caches]
            k_list = (ctypes.c_void_p * len(pairs))(*[k for k, _ in pairs])
            v_list = (ctypes.c_void_p * len(pairs))(*[v for _, v in pairs])
            options = _capi.PlanOptions(ctypes.sizeof(_capi.PlanOptions), 0, len(pairs), 0,
                                        ctypes.cast(k_list, ctypes.POINTER(ctypes.c_void_p)),
                                        ctypes.cast(v_list, ctypes.POINTER(ctypes.c_void_p)))
            keep = (k_list, v_list)
        handle = ctypes.c_void_p()
        self.library.check("wideattn_plan_create", self._lib.wideattn_plan_create(
            self._handle, ctypes.byref(params), ctypes.byref(options) if options is not None else None,
            ctypes.byref(handle)))
        del keep
        plan = Plan(self, handle.value)
        self._plans.add(plan)
        return plan

    def launch_quantize(self, params, stream):
        """Queues wideattn_quantize_to_cache of `params` (a _capi.QuantizeParams) on `stream` (an
        integer CUstream handle); raises the library's error."""
        self._require_open("wideattn.Context.launch_quantize")
        _check_params("wideattn.Context.launch_quantize", params, _capi.QuantizeParams)
        status = self._quantize(self._handle, ctypes.byref(params), stream)
        if status:
            self.library.check("wideattn_quantize_to_cache", status)

    def launch_k_from_v_rebuild(self, params, out, stream):
        """Queues wideattn_k_from_v_rebuild of `params` (a _capi.PrefillParams of a K-from-V call)
        into `out` (a _capi.KFromVRebuildOut, its struct_size set here) on `stream` (an integer
        CUstream handle); raises the library's error (every argument is validated before the
        driver is loaded)."""
        self._require_open("wideattn.Context.launch_k_from_v_rebuild")
        _check_params("wideattn.Context.launch_k_from_v_rebuild", params)
        _check_params("wideattn.Context.launch_k_from_v_rebuild", out, _capi.KFromVRebuildOut, "out")
        out.struct_size = ctypes.sizeof(_capi.KFromVRebuildOut)
        status = self._rebuild(self._handle, ctypes.byref(params), ctypes.byref(out), stream)
        if status:
            self.library.check("wideattn_k_from_v_rebuild", status)

    def launch_scale(self, params, stream, power_of_two=False):
        """Queues wideattn_compute_scale of `params` (a _capi.ScaleParams) on `stream` (an integer
        CUstream handle), or with power_of_two wideattn_compute_scale_pow2 (the scale rounded up to
        a power of two); raises the library's error."""
        self._require_open("wideattn.Context.launch_scale")
        _check_params("wideattn.Context.launch_scale", params, _capi.ScaleParams)
        function, name = ((self._scale_pow2, "wideattn_compute_scale_pow2") if power_of_two
                          else (self._scale, "wideattn_compute_scale"))
        status = function(self._handle, ctypes.byref(params), stream)
        if status:
            self.library.check(name, status)


@dataclasses.dataclass(frozen=True)
class PlanInfo:
    """What a plan launches (wideattn_plan_info)."""

    launch: LaunchPlan
    has_lse: bool
    num_cached_maps: int  # caches whose tensor maps the plan holds
    tma_kv: bool          # the kernel reads K/V through tensor maps
    checked: bool         # every run checks the metadata (checked mode)


class Plan:
    """A wideattn_plan of one Context: run() per layer with that layer's tensors (integer device
    pointers), close() (or the context's close) destroys it. A closed plan's calls raise
    InvalidArgumentError from the library (its handle is refused, never dereferenced)."""

    def __init__(self, context, handle):
        self.context = context
        self.handle = handle
        self._lib = context._lib
        self._run = context._lib.wideattn_plan_run
        self._check = context.library.check

    def run(self, q, k_cache, v_cache, o, lse=None, stream=None):
        """Queues the plan for one layer (wideattn_plan_run) on `stream` (an integer CUstream
        handle; None or 0 the legacy default); q, k_cache, v_cache, o, lse integer device pointers
        (lse None exactly when the plan was made without one). Raises the library's error."""
        status = self._run(self.handle, q, k_cache, v_cache, o, lse, stream)
        if status:
            self._check("wideattn_plan_run", status)

    def run_address(self):
        """The address of the wideattn_plan_run this plan calls (its context's library's), for
        callers outside Python that run the plan's handle themselves (wideattn.cpp_ops)."""
        return ctypes.cast(self._run, ctypes.c_void_p).value

    def run_tensors(self, tensors, stream=None):
        """wideattn_plan_run_tensors of `tensors`, a _capi.PlanTensors (its struct_size set here)
        that also states the caches' layout for the library to check against the plan's, on
        `stream` (an integer CUstream handle; None or 0 the legacy default)."""
        tensors.struct_size = ctypes.sizeof(_capi.PlanTensors)
        self._check("wideattn_plan_run_tensors",
                    self._lib.wideattn_plan_run_tensors(self.handle, ctypes.byref(tensors), stream))

    def info(self):
        """The PlanInfo of the plan (wideattn_plan_get_info)."""
        raw = _capi.PlanInfo()
        raw.struct_size = ctypes.sizeof(_capi.PlanInfo)
        self._check("wideattn_plan_get_info", self._lib.wideattn_plan_get_info(self.handle, ctypes.byref(raw)))
        launch = LaunchPlan(raw.launch.kernel_index, raw.launch.num_splits, raw.launch.merge_kernel_index,
                            raw.launch.preferred_splits, raw.launch.workspace_bytes)
        return PlanInfo(launch, bool(raw.has_lse), raw.num_cached_maps, bool(raw.tma_kv), bool(raw.checked))

    def close(self):
        """Destroys the plan (wideattn_plan_destroy); closing twice is harmless (the second is a no-op
        here, so the library's refusal of a stale handle is not raised)."""
        if self.handle:
            handle, self.handle = self.handle, None
            if self.context._handle:
                self._lib.wideattn_plan_destroy(handle)
            for hook in plan_close_hooks:
                hook()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "handle", None):
            self.close()


def switch_from_env(name, meaning, default=False):
    """An on/off environment variable `name`: "1" on, "0" off, unset or empty `default`; any other
    value raises InvalidArgumentError naming the variable and what 1 means (`meaning`)."""
    value = os.environ.get(name, "")
    if value not in ("", "0", "1"):
        on, off = ("1 / unset", "0") if default else ("1", "0 / unset")
        raise errors.invalid_argument("wideattn", f"${name}={value!r}: use {on} ({meaning}) or {off} (off)")
    return value == "1" if value else bool(default)


def _debug_from_env():
    return switch_from_env(ENV_DEBUG, "debug mode")


_debug = {"on": _debug_from_env()}

# Called after any Plan is closed (no arguments) and after set_debug (the new setting): how
# wideattn.cpp_ops forgets plan handles and follows debug mode.
plan_close_hooks = []
debug_hooks = []


def set_debug(enabled):
    """Turns debug mode on (`enabled` true) or off; also $WIDEATTN_DEBUG=1 at import. In debug mode
    the torch entry points check every call's arguments and launch every op call through a
    one-shot wideattn_prefill, instead of checking once per argument signature and reusing
    cached plans. Returns the previous setting."""
    previous = _debug["on"]
    _debug["on"] = bool(enabled)
    for hook in debug_hooks:
        hook(_debug["on"])
    return previous


def debug_enabled():
    """Whether debug mode is on (set_debug)."""
    return _debug["on"]


_default = {"context": None, "bundle": None, "library": None}
_default_lock = threading.Lock()


def configure(bundle=None, library=None):
    """Sets the `bundle` and `library` the default context opens (as for Context; closing one
    already open, so the next default_context() opens them)."""
    with _default_lock:
        if _default["context"] is not None:
            _default["context"].close()
        _default.update(context=None, bundle=bundle, library=library)


def default_library():
    """The libwideattn the default context loads (configure's `library`, else load_library's
    lookup), loaded without opening a bundle: for the calls that need no context."""
    return load_library(_default["library"])


def default_context():
    """The process-wide context the torch ops use, opened at first use."""
    context = _default["context"]
    if context is None:
        with _default_lock:
            if _default["context"] is None:
                _default["context"] = Context(_default["bundle"], _default["library"])
            context = _default["context"]
    return context
