"""test_install.py - `meson install` installs the Python package: into a scratch DESTDIR, the
sources and a _paths.py naming the installed library, and that copy lists the installed bundle
(the DESTDIR's library and bundle named through $WIDEATTN_LIB / $WIDEATTN_BUNDLE, since the
prefix itself is not populated).

usage: python3 test_install.py MESON BUILD_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

import harness

PACKAGE_FILES = ("__init__.py", "_capi.py", "_paths.py", "attention.py", "library.py", "ops.py", "transformers.py")


def _find(root, name, parent=None):
    for directory, _, files in os.walk(root):
        if name in files and (parent is None or os.path.basename(directory) == parent):
            return os.path.join(directory, name)
    raise AssertionError(f"{name} not installed under {root}")


def test_meson_install_installs_the_package():
    meson, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as destdir:
        subprocess.run([meson, "install", "-C", build, "--destdir", destdir, "--no-rebuild", "--quiet"], check=True,
                       capture_output=True)
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
