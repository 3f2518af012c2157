"""Argument checks of the torch API: shapes, dtypes, devices and strides, each failure an
InvalidArgumentError naming the function, the argument and the value."""

import math

import torch

from . import _capi
from . import errors

INT32_MAX = 2 ** 31 - 1

E4M3_DTYPES = tuple(d for d in (torch.uint8, getattr(torch, "float8_e4m3fn", None)) if d is not None)
ATTENTION_IN_DTYPES = (torch.bfloat16,) + E4M3_DTYPES
OUT_DTYPES = (torch.bfloat16, torch.float64)


def dtype_names(dtypes):
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


class Checker:
    """Collects the context (function name, the device every tensor must be on) of one call."""

    def __init__(self, call):
        self.call = call
        self.device = None

    def fail(self, message):
        raise errors.invalid_argument(self.call, message)

    def tensor(self, name, value, ndim, dtypes, shape_text, optional=False):
        """Checks a tensor argument's type, rank, dtype, device and unit last stride (a fast path
        for arguments that pass; the detailed checks only to word a failure)."""
        try:
            if value.dim() == ndim and value.dtype in dtypes and (
                    not ndim or value.stride(-1) == 1 or value.shape[-1] <= 1):
                device = value.device
                if self.device is None:
                    self.device = device
                    return value
                if device == self.device:
                    return value
        except AttributeError:
            pass
        return self._refuse(name, value, ndim, dtypes, shape_text, optional)

    def _refuse(self, name, value, ndim, dtypes, shape_text, optional):
        if value is None:
            if optional:
                return None
            self.fail(f"{name} is None; expected a tensor {shape_text}")
        if not isinstance(value, torch.Tensor):
            self.fail(f"{name} must be a torch.Tensor {shape_text}, got {type(value).__name__}")
        if value.dim() != ndim:
            self.fail(f"{name} must be {ndim}-D {shape_text}, got shape {tuple(value.shape)}")
        if value.dtype not in dtypes:
            self.fail(f"{name} has dtype {str(value.dtype).replace('torch.', '')}; expected {dtype_names(dtypes)}")
        if self.device is not None and value.device != self.device:
            self.fail(f"{name} is on {value.device}, the other tensors on {self.device}")
        self.fail(f"{name} must be contiguous in its last dimension, got strides {tuple(value.stride())}")

    def dim(self, name, value, expected, what):
        if value != expected:
            self.fail(f"{name} is {value} but {what} is {expected}")

    def scale(self, name, value, needed, owner):
        """A per-tensor dequantisation scale: one float32 element, required iff `needed`."""
        if value is None:
            if needed:
                self.fail(f"{name} is None but {owner} is e4m3 and needs its per-tensor scale")
            return None
        if not needed:
            self.fail(f"{name} is set but {owner} is not e4m3 (pass None)")
        self.tensor(name, value, value.dim() if isinstance(value, torch.Tensor) else 1, (torch.float32,),
                    "of one float32 element")
        if value.numel() != 1:
            self.fail(f"{name} must hold one float32 element, got shape {tuple(value.shape)}")
        return value

    def softmax_scale(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"softmax_scale must be a float, got {type(value).__name__}")
        if not math.isfinite(value) or value <= 0:
            self.fail(f"softmax_scale={value} must be finite and > 0")
        return float(value)

    def count(self, name, value, minimum=0, optional=False, maximum=INT32_MAX):
        """A host integer (a length hint or a size). A one-element CPU tensor is read; a device
        tensor is refused: reading it would synchronise the stream and break CUDA-graph capture."""
        if value is None and optional:
            return None
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
            if value.device.type != "cpu":
                self.fail(f"{name} is a tensor on {value.device}; pass a host int (reading a device "
                          f"tensor would synchronise and break CUDA-graph capture)")
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{name} must be an int, got {type(value).__name__}")
        if not minimum <= value <= maximum:
            self.fail(f"{name}={value} is outside {minimum} .. {maximum}")
        return value

    def num_splits(self, value):
        """None (the library chooses: 0), 0, 1 (never split) or an exact count up to MAX_SPLITS."""
        if value is None:
            return _capi.SPLITS_AUTO
        return self.count("num_splits", value, maximum=_capi.MAX_SPLITS)

    def int32_extent(self, name, value):
        if value > INT32_MAX:
            self.fail(f"{name}={value} exceeds the int32 range of the C API")
