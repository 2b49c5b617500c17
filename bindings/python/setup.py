"""Builds the petrel package: the repository's CMake build makes the compiled module
(_petrel, the engine linked in statically), which is copied into the package.

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation ./bindings/python

Needs CMake, a C++17 compiler and the engine's build dependencies (Debian 12: cmake g++
libflatbuffers-dev flatbuffers-compiler libxsimd-dev pybind11-dev python3-dev); nothing is
downloaded. ccache is used when installed. PETREL_CMAKE_ARGS adds arguments to the CMake
configure step; CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent.parent


def project_version():
    text = (REPOSITORY / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(Petrel VERSION ([0-9.]+)", text)
    return match.group(1) if match else "0.0.0"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures and builds the target petrel_python in build_temp, then copies the module."""

    def build_extension(self, ext):
        if not (REPOSITORY / "engine").is_dir():
            raise RuntimeError(f"{REPOSITORY} is not Petrel's repository: build the package from its "
                               "bindings/python directory")
        if shutil.which("cmake") is None:
            raise RuntimeError("cmake is needed to build petrel (apt-get install cmake)")
        build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(REPOSITORY), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DPETREL_BUILD_TOOLS=OFF", "-DPETREL_BUILD_TESTS=OFF", "-DPETREL_BUILD_BENCH=OFF",
            "-DPETREL_BUILD_PYTHON=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        env = dict(os.environ)
        if shutil.which("ccache") is not None:
            configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            env.setdefault("CCACHE_BASEDIR", str(REPOSITORY))
        configure += shlex.split(env.get("PETREL_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True, env=env)
        jobs = env.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "petrel_python", "--parallel", jobs],
                       check=True, env=env)
        built = sorted((build_dir / "bindings" / "python" / "petrel").glob("_petrel*.so"))
        if not built:
            raise RuntimeError("the build made no petrel/_petrel module: was pybind11 found? "
                               "(apt-get install pybind11-dev python3-pybind11 python3-dev)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="petrel",
    version=project_version(),
    description="Petrel: CPU inference for translation models and small language models "
                "(its own API and CTranslate2's Translator/Generator API)",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=["petrel"],
    ext_modules=[CMakeExtension("petrel._petrel")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.7",
    zip_safe=False,
)
