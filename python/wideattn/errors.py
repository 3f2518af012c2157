"""Exceptions of the wideattn package: one class per libwideattn status code, all under
WideattnError, each carrying the status, its name and the library's message (which names the
argument and its value). Argument checks done in Python raise InvalidArgumentError too."""

from . import _capi


class WideattnError(RuntimeError):
    """A wideattn call failed. `call` is the function, `status` the wideattn_status code (None
    when the library could not be loaded), `status_name` its name, `message` the explanation."""

    def __init__(self, call, message, status=None, status_name=None):
        self.call = call
        self.message = message
        self.status = status
        self.status_name = status_name
        prefix = f"{call}: {status_name}: " if status_name else f"{call}: "
        super().__init__(prefix + message)


class InvalidArgumentError(WideattnError, ValueError):
    """WIDEATTN_ERROR_INVALID_ARGUMENT, or a tensor argument refused by the Python checks."""


class UnsupportedError(WideattnError):
    """WIDEATTN_ERROR_UNSUPPORTED: no kernel of the bundle fits the call on this device."""


class NoDriverError(WideattnError):
    """WIDEATTN_ERROR_NO_DRIVER: libcuda.so.1 could not be loaded or lacks a function."""


class NoDeviceError(WideattnError):
    """WIDEATTN_ERROR_NO_DEVICE: no usable device, or no current CUDA context."""


class BundleError(WideattnError):
    """WIDEATTN_ERROR_BUNDLE: manifest or cubin missing, unreadable or corrupt."""


class CudaError(WideattnError):
    """WIDEATTN_ERROR_CUDA: a CUDA driver call failed (the message has the driver's error)."""


class InternalError(WideattnError):
    """WIDEATTN_ERROR_INTERNAL: an unexpected failure inside the library (e.g. out of host memory);
    the message names the function."""


class LibraryNotFoundError(WideattnError, OSError):
    """libwideattn itself could not be found or loaded."""


_BY_STATUS = {
    _capi.STATUS_INVALID_ARGUMENT: InvalidArgumentError,
    _capi.STATUS_UNSUPPORTED: UnsupportedError,
    _capi.STATUS_NO_DRIVER: NoDriverError,
    _capi.STATUS_NO_DEVICE: NoDeviceError,
    _capi.STATUS_BUNDLE: BundleError,
    _capi.STATUS_CUDA: CudaError,
    _capi.STATUS_INTERNAL: InternalError,
}

INVALID_ARGUMENT_NAME = "WIDEATTN_ERROR_INVALID_ARGUMENT"


def from_status(call, status, status_name, message):
    """The exception for a non-OK `status` returned by `call`, with its `status_name` and the
    library's `message` (WideattnError itself for a code this module does not know)."""
    return _BY_STATUS.get(status, WideattnError)(call, message, status, status_name)


def invalid_argument(call, message):
    """An InvalidArgumentError of a Python-side check in `call`, explained by `message`."""
    return InvalidArgumentError(call, message, _capi.STATUS_INVALID_ARGUMENT, INVALID_ARGUMENT_NAME)
