"""Builds the wireless_comm wheel: the pure-Python package from python/wireless_comm plus the
extension wireless_comm._core, compiled by the project's CMake build (the extension links the
C++ static libraries that build makes), and that build's `wcomm` executable as
wireless_comm/_bin/wcomm (run by python -m wireless_comm.benchmark).

WCOMM_BUILD_DIR names that CMake build directory (default: <repo>/build). It is configured
when it does not exist yet, and only the extension's target is built in it.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = os.path.abspath(os.environ.get("WCOMM_BUILD_DIR", os.path.join(ROOT, "build")))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, *generator,
                                   "-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DWCOMM_PYTHON={sys.executable}"])
        jobs = os.environ.get("WCOMM_JOBS", "2")
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "wcomm_python_core", "wcomm_cli",
                               "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "wireless_comm", "_core*.so"))
        if not built:
            raise RuntimeError(f"the CMake build in {build_dir} made no wireless_comm/_core*.so "
                               "(is pybind11-dev installed? run scripts/bootstrap.sh)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)
        # The `wcomm` executable goes in as wireless_comm/_bin/wcomm (python -m
        # wireless_comm.benchmark runs its `wcomm bench`).
        cli = os.path.join(build_dir, "wcomm")
        if not os.access(cli, os.X_OK):
            raise RuntimeError(f"the CMake build in {build_dir} made no wcomm executable")
        cli_target = os.path.join(os.path.dirname(target), "_bin", "wcomm")
        os.makedirs(os.path.dirname(cli_target), exist_ok=True)
        shutil.copy2(cli, cli_target)
        os.chmod(cli_target, 0o755)


setup(
    packages=["wireless_comm"],
    package_data={"wireless_comm": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("wireless_comm._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
