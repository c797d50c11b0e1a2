"""Compiled per-token loops over a shard's flat Arrow buffers, and their numpy formulations.

``compiled``     the ctypes wrappers over ``_kernels.c`` and ``_labeller.c`` (built by ``pip install``), with
                 the numpy fallback when the library was never built
``numpy_loops``  every kernel as whole-array numpy, bit for bit the same results (installs without a C compiler)
``codes``        the role codes the C file compiles as plain ints, mirrored from ``spans.labels.Role``
"""
