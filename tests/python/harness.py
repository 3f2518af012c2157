"""harness.py - the runner of the Python package's test scripts: runs every test_* function of
the calling module (or, with $WIDEATTN_TESTS set to comma-separated substrings, those whose names
contain one of them), prints one line per test and a closing count, exits 1 on any failure and 77
(meson's "skipped") when the script's requirement is missing; plus functions shared by the scripts."""

import importlib.abc
import os
import sys
import traceback

SKIP_EXIT = 77


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP_EXIT)


class _BlockTorch(importlib.abc.MetaPathFinder):
    """Makes `import torch` fail as on a machine without it."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked by the test)")
        return None


def block_torch():
    sys.meta_path.insert(0, _BlockTorch())


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("torch is not installed for this interpreter (Debian: python3-torch)")


def require_cuda():
    """torch with a CUDA device (the GPU scripts), else the script is skipped."""
    require_torch()
    import torch
    if not torch.cuda.is_available():
        skip("no CUDA device")


def require_transformers_gemma4():
    """require_cuda, and a transformers with Gemma4ForCausalLM, else the script is skipped."""
    require_cuda()
    try:
        import transformers  # noqa: F401
        from transformers import Gemma4ForCausalLM  # noqa: F401
    except ImportError as error:
        skip(f"transformers with Gemma 4 not importable: {error}")


def expect_raises(error_type, substrings, function, *args, **kwargs):
    """Calls function and checks it raises error_type whose text contains every substring."""
    try:
        function(*args, **kwargs)
    except error_type as error:
        text = str(error)
        for substring in substrings:
            if substring not in text:
                raise AssertionError(f"{error_type.__name__} without {substring!r}: {text}")
        return error
    raise AssertionError(f"no {error_type.__name__} (expected one mentioning {substrings})")


def run(namespace):
    only = [part for part in os.environ.get("WIDEATTN_TESTS", "").split(",") if part]
    tests = [(name, function) for name, function in namespace.items()
             if name.startswith("test_") and callable(function) and (not only or any(p in name for p in only))]
    passed = failed = 0
    for name, function in tests:
        try:
            function()
            passed += 1
            print(f"PASS {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or not tests else 0)
