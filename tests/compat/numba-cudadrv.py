#!/usr/bin/python3
"""Runs numba's own CUDA driver tests (numba.cuda.tests.cudadrv, Debian's
python3-numba) and prints one verdict line per test for run-compat.py:

    RESULT <test id> ok|fail|error|skip|xfail|xpass

numba loads libcuda.so.1 through ctypes (NUMBA_CUDA_DRIVER names cusim's).

One shim: numba 0.56 binds every driver function as <name>_v2 when the
driver exports that name, assuming _v2 is the same call. CUDA 13 added
cuCtxGetDevice_v2(CUdevice *, CUcontext) and cuCtxSynchronize_v2(CUcontext),
which take one argument more: numba 0.56 calls them with the old prototype
and passes garbage as the context, on a real CUDA 13 driver as on cusim.
Those two are bound under their unversioned names here (what a numba that
knows CUDA 13 does); every other binding is numba's own.

COMPAT_TOOLKIT names the CUDA toolkit: numba looks for libNVVM and libdevice
under CUDA_HOME in the layout of older toolkits (nvvm/lib64), so a
directory of links in that layout is made and CUDA_HOME set to it. Exit status 77 (skipped)
without numba.
"""
import os
import sys
import tempfile
import unittest

try:
    import numba
    import numba.cuda.cudadrv.driver as drv
except ImportError as e:
    print(f"numba is not installed: {e}", file=sys.stderr)
    sys.exit(77)

CUDA13_CHANGED = {"cuCtxGetDevice", "cuCtxSynchronize"}
_find_api = drv.Driver._find_api


def find_api(self, fname):
    if fname in CUDA13_CHANGED:
        return getattr(self.lib, fname)
    return _find_api(self, fname)


drv.Driver._find_api = find_api


class Recording(unittest.TextTestResult):
    """Records one verdict per test id."""

    verdicts = {}

    def _put(self, test, verdict):
        Recording.verdicts[test.id()] = verdict

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._put(test, "xpass")


def cuda_home(toolkit):
    """A CUDA_HOME in numba's expected layout, linking into the toolkit."""
    home = tempfile.mkdtemp(prefix="compat-cuda-home-", dir=os.environ.get("COMPAT_TMPDIR"))
    os.mkdir(os.path.join(home, "nvvm"))
    for link, target in (("nvvm/lib64", "lib"), ("nvvm/libdevice", "nvvm/libdevice"),
                         ("lib64", "lib64"), ("include", "include"), ("bin", "bin")):
        os.symlink(os.path.join(toolkit, target), os.path.join(home, link))
    return home


def main():
    names = sys.argv[1:] or ["numba.cuda.tests.cudadrv"]
    if os.environ.get("COMPAT_TOOLKIT") and not os.environ.get("COMPAT_CUDA_HOME"):
        # numba reads CUDA_HOME when it is imported: start again with it set.
        home = cuda_home(os.environ["COMPAT_TOOLKIT"])
        os.environ["CUDA_HOME"] = os.environ["COMPAT_CUDA_HOME"] = home
        os.execv(sys.executable, [sys.executable] + sys.argv)
    loader = unittest.TestLoader()
    # numba's load_tests names modules relative to the top-level directory.
    loader._top_level_dir = os.path.dirname(os.path.dirname(numba.__file__))
    suite = loader.loadTestsFromNames(names)
    unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Recording).run(suite)
    sys.stderr.flush()
    for tid, verdict in sorted(Recording.verdicts.items()):
        print(f"RESULT {tid} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
