"""Builds the wireless_comm wheel: the pure-Python package from python/wireless_comm plus the
extension wireless_comm._core, compiled by the project's CMake build (Release, without tests,
examples or benchmarks) for the interpreter that runs this, and that build's `wcomm`
executable as wireless_comm/_bin/wcomm (run by python -m wireless_comm.benchmark).

The CMake build goes in setuptools' build directory: build-python/ beside this file for
`pip install .` (kept, so a second install rebuilds only what changed), a temporary one for a
wheel made from the sdist. WCOMM_BUILD_DIR names an existing CMake build to take the
extension from instead (scripts/install-python.sh: the tests' own build); WCOMM_CMAKE_ARGS
adds to a new build's configuration (-DCMAKE_UNITY_BUILD=ON, say); WCOMM_JOBS: parallel jobs.
"""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        given = os.environ.get("WCOMM_BUILD_DIR")
        build_dir = os.path.abspath(given or os.path.join(self.build_temp, "cmake"))
        jobs = os.environ.get("WCOMM_JOBS", str(os.cpu_count() or 2))
        configure = ["cmake", "-S", ROOT, "-B", build_dir, f"-DWCOMM_PYTHON={sys.executable}"]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            configure += ["-G", "Ninja"] if shutil.which("ninja") else []
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF", "-DWCOMM_EXAMPLES=OFF",
                          "-DWCOMM_BENCHMARKS=OFF", *os.environ.get("WCOMM_CMAKE_ARGS", "").split()]
        subprocess.check_call(configure)  # (again for a given build: for this interpreter)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "wcomm_python_core", "wcomm_cli",
                               "-j", jobs])
        # The extension CMake built for this interpreter: its ABI tag is in the name.
        name = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build_dir, "python", "wireless_comm", name)
        if not os.path.exists(built):
            found = glob.glob(os.path.join(build_dir, "python", "wireless_comm", "_core*"))
            raise RuntimeError(f"the CMake build in {build_dir} made no wireless_comm/{name} for {sys.executable} "
                               f"(found: {found or 'none'}; is pybind11-dev installed? scripts/bootstrap.sh)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)
        cli = os.path.join(build_dir, "wcomm")
        if not os.access(cli, os.X_OK):
            raise RuntimeError(f"the CMake build in {build_dir} made no wcomm executable")
        cli_target = os.path.join(os.path.dirname(target), "_bin", "wcomm")
        os.makedirs(os.path.dirname(cli_target), exist_ok=True)
        shutil.copy2(cli, cli_target)
        os.chmod(cli_target, 0o755)


setup(
    ext_modules=[Extension("wireless_comm._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # Not build/: that is the C++ developer's CMake build (scripts/build.sh).
    options={"build": {"build_base": "build-python"}},
)
