"""The one build step pyproject.toml cannot declare without an experimental table: the C kernels.

``kernels/_kernels.c`` (the per-token loops kernels/compiled.py opens with ctypes) is plain C99 and includes no
Python header, so ``pip install`` needs a C compiler and nothing else. The extension is optional:
without a working compiler the install still succeeds, with a warning, and kernels/compiled.py runs the
numpy references of the same loops (kernels/numpy_loops.py; slower, same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("drafter_contracts.kernels._kernels", ["src/drafter_contracts/kernels/_kernels.c",
                                                           "src/drafter_contracts/kernels/_labeller.c"],
                             extra_compile_args=["-O3", "-std=c99"], optional=True),
                   # hidden-state moments (hidden/moments.py; numpy formulation without it)
                   Extension("drafter_contracts.hidden._hs_kernels", ["src/drafter_contracts/hidden/_hs_kernels.c"],
                             extra_compile_args=["-O3", "-std=c99"], optional=True)])
