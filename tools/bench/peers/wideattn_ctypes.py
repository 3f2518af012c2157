"""ctypes binding of libwideattn (the C API in include/wideattn.h) for the peer harness.

The structs, constants and function declarations are the Python package's own mirror,
python/wideattn/_capi.py (loaded from this checkout by file path, so importing it neither needs
nor shadows an installed wideattn package); tests/python/test_package.py checks that mirror field
by field against the compiler's layout (tests/struct_layout.c). This file adds the calls the
peer harness needs. Imports only the standard library, so it loads on machines without torch or a GPU.
"""

import ctypes
import importlib.util
import os
import sys

CAPI_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python", "wideattn",
                         "_capi.py")
_CAPI_MODULE = "wideattn_capi_mirror"


def _load_capi():
    if _CAPI_MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(_CAPI_MODULE, os.path.normpath(CAPI_PATH))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[_CAPI_MODULE] = module
    return sys.modules[_CAPI_MODULE]


_capi = _load_capi()

STATUS_OK = _capi.STATUS_OK
STATUS_INVALID_ARGUMENT = _capi.STATUS_INVALID_ARGUMENT
STATUS_UNSUPPORTED = _capi.STATUS_UNSUPPORTED
STATUS_NO_DRIVER = _capi.STATUS_NO_DRIVER
STATUS_NO_DEVICE = _capi.STATUS_NO_DEVICE
STATUS_BUNDLE = _capi.STATUS_BUNDLE
STATUS_CUDA = _capi.STATUS_CUDA
STATUS_INTERNAL = _capi.STATUS_INTERNAL

DTYPE_BF16 = _capi.DTYPE_BF16
DTYPE_F16 = _capi.DTYPE_F16
DTYPE_F32 = _capi.DTYPE_F32
DTYPE_F64 = _capi.DTYPE_F64
DTYPE_E4M3 = _capi.DTYPE_E4M3

MAX_SPLITS = _capi.MAX_SPLITS
FLAG_V_TRANSPOSED = _capi.FLAG_V_TRANSPOSED

PrefillParams = _capi.PrefillParams
KernelInfo = _capi.KernelInfoStruct
LaunchPlan = _capi.LaunchPlan


def check_layout():
    """Raises RuntimeError if a mirror's size differs from the C layout's (_capi.check_sizes)."""
    _capi.check_sizes()


class WideattnError(RuntimeError):
    """A libwideattn call returned a non-OK status; carries the status and message."""

    def __init__(self, call, status, status_name, message):
        super().__init__(f"{call}: {status_name} ({status}): {message}")
        self.status = status


class Library:
    """A loaded libwideattn and one context opened on a bundle directory."""

    def __init__(self, lib_path, bundle_dir):
        check_layout()
        self._lib = ctypes.CDLL(os.path.abspath(lib_path))
        self._declare()
        self._ctx = ctypes.c_void_p()
        bundle = os.path.abspath(bundle_dir).encode() if bundle_dir else None
        self._check("wideattn_open", self._lib.wideattn_open(ctypes.byref(self._ctx), bundle))

    def _declare(self):
        _capi.declare(self._lib)

    def _check(self, call, status):
        if status != STATUS_OK:
            name = self._lib.wideattn_status_string(status).decode()
            message = self._lib.wideattn_last_error().decode()
            raise WideattnError(call, status, name, message)

    def version(self):
        return self._lib.wideattn_version().decode()

    def bundle_dir(self):
        return self._lib.wideattn_bundle_dir(self._ctx).decode()

    def kernels(self):
        """Every kernel of the bundle as a dict of its KernelInfo fields."""
        result = []
        for index in range(self._lib.wideattn_kernel_count(self._ctx)):
            info = KernelInfo()
            self._check("wideattn_get_kernel_info",
                        self._lib.wideattn_get_kernel_info(self._ctx, index, ctypes.byref(info)))
            entry = {}
            for field, _ in KernelInfo._fields_:
                value = getattr(info, field)
                entry[field] = value.decode() if isinstance(value, bytes) else value
            result.append(entry)
        return result

    def set_prefill_kernel(self, name):
        """Restricts prefill selection to the kernel `name` (None: automatic selection)."""
        self._check("wideattn_set_prefill_kernel",
                    self._lib.wideattn_set_prefill_kernel(self._ctx, name.encode() if name else None))

    def is_supported(self, params, cc_major, cc_minor):
        """Index of the kernel that would run these params; raises WideattnError if none."""
        index = ctypes.c_int32(-1)
        self._check("wideattn_is_supported",
                    self._lib.wideattn_is_supported(self._ctx, ctypes.byref(params), cc_major,
                                                    cc_minor, ctypes.byref(index)))
        return index.value

    def plan_launch(self, params, cc_major, cc_minor, num_sms):
        """The LaunchPlan of `params` on a device of that compute capability and SM count."""
        plan = LaunchPlan()
        self._check("wideattn_plan_launch",
                    self._lib.wideattn_plan_launch(self._ctx, ctypes.byref(params), cc_major, cc_minor,
                                                   num_sms, ctypes.byref(plan)))
        return plan

    def workspace_size(self, params):
        """The workspace bytes wideattn_prefill would like for `params` on the current device."""
        size = ctypes.c_int64(0)
        self._check("wideattn_workspace_size",
                    self._lib.wideattn_workspace_size(self._ctx, ctypes.byref(params), ctypes.byref(size)))
        return size.value

    def prefill(self, params, stream):
        """Queues one launch on `stream` (an integer CUstream handle, 0 = legacy default)."""
        self._check("wideattn_prefill",
                    self._lib.wideattn_prefill(self._ctx, ctypes.byref(params),
                                               ctypes.c_void_p(stream)))

    def close(self):
        if self._ctx:
            self._lib.wideattn_close(self._ctx)
            self._ctx = ctypes.c_void_p()
