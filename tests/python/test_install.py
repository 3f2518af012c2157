"""test_install.py - `meson install` into a scratch DESTDIR: the Python package (its sources and
a _paths.py naming the installed library; that copy lists the installed bundle, the DESTDIR's
library and bundle named through $WIDEATTN_LIB / $WIDEATTN_BUNDLE, since the prefix itself is
not populated), and wideattn.pc: a C program built with its --cflags and, against the static
libwideattn.a, its --static --libs links and runs.

usage: python3 test_install.py MESON BUILD_DIR PKG_CONFIG CC [CC ARGS...]
"""

import json
import os
import subprocess
import sys
import tempfile

import harness

PACKAGE_FILES = ("__init__.py", "_capi.py", "_paths.py", "attention.py", "library.py", "ops.py", "transformers.py",
                 "cpp_ops.py", "cpp_ops.cpp")


def _find(root, name, parent=None):
    for directory, _, files in os.walk(root):
        if name in files and (parent is None or os.path.basename(directory) == parent):
            return os.path.join(directory, name)
    raise AssertionError(f"{name} not installed under {root}")


C_PROGRAM = """#include <stdio.h>
#include <wideattn.h>
int main(void) { printf("%s\\n", wideattn_version()); return 0; }
"""


def _install(destdir):
    meson, build = sys.argv[1], sys.argv[2]
    subprocess.run([meson, "install", "-C", build, "--destdir", destdir, "--no-rebuild", "--quiet"], check=True,
                   capture_output=True)


def _pkg_config(pc_file, destdir, *args):
    """pkg-config's answer for the installed wideattn.pc, its prefix moved under `destdir`."""
    with open(pc_file) as f:
        prefix = next(line.split("=", 1)[1].strip() for line in f if line.startswith("prefix="))
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc_file))
    result = subprocess.run([sys.argv[3], f"--define-variable=prefix={destdir}{prefix}", *args, "wideattn"], env=env,
                            check=True, capture_output=True, text=True)
    return result.stdout.split()


def test_static_library_links_with_the_pkg_config_flags():
    """A C program links libwideattn.a (C++ inside) with `pkg-config --static --libs` alone."""
    compiler = sys.argv[4:]
    with tempfile.TemporaryDirectory() as destdir:
        _install(destdir)
        pc_file = _find(destdir, "wideattn.pc", "pkgconfig")
        archive = _find(destdir, "libwideattn.a")
        libs = [archive if flag == "-lwideattn" else flag
                for flag in _pkg_config(pc_file, destdir, "--static", "--libs") if not flag.startswith("-L")]
        assert archive in libs, libs
        source, program = os.path.join(destdir, "version.c"), os.path.join(destdir, "version")
        with open(source, "w") as f:
            f.write(C_PROGRAM)
        build = subprocess.run(compiler + [source, *_pkg_config(pc_file, destdir, "--cflags"), *libs, "-o", program],
                               capture_output=True, text=True)
        assert build.returncode == 0, (libs, build.stderr[-2000:])
        version = subprocess.run([program], check=True, capture_output=True, text=True).stdout.strip()
        assert version == _pkg_config(pc_file, destdir, "--modversion")[0], version


def test_meson_install_installs_the_package():
    with tempfile.TemporaryDirectory() as destdir:
        _install(destdir)
        init = _find(destdir, "__init__.py", "wideattn")
        package = os.path.dirname(init)
        for name in PACKAGE_FILES:
            assert os.path.isfile(os.path.join(package, name)), name
        paths = {}
        with open(os.path.join(package, "_paths.py")) as f:
            exec(f.read(), paths)
        assert paths["LOCATION"] == "installed" and paths["LIBRARY"].endswith("/libwideattn.so"), paths
        assert not paths["BUNDLE"]
        library = destdir + paths["LIBRARY"]
        bundle = os.path.dirname(_find(destdir, "manifest.json", "bundle"))
        env = dict(os.environ, PYTHONPATH=os.path.dirname(package), WIDEATTN_LIB=library, WIDEATTN_BUNDLE=bundle)
        listing = subprocess.run([sys.executable, "-c", "import json, wideattn; print(json.dumps("
                                  "[wideattn.__file__, [k.name for k in wideattn.kernels()]]))"],
                                 env=env, check=True, capture_output=True, text=True).stdout
        location, names = json.loads(listing)
        assert location == init, (location, init)
        with open(os.path.join(bundle, "manifest.json")) as f:
            assert names == [k["name"] for k in json.load(f)["kernels"]]


if __name__ == "__main__":
    harness.run(dict(globals()))
