"""The role codes the compiled kernels read, in the one place both kernel backends take them from.

``kernels/_kernels.c`` compiles role codes as plain ints, so the wrappers (``kernels/compiled.py``) and their numpy
forms (``kernels/numpy_loops.py``) need the same numbers without importing each other. ``spans/labels.py``
holds the enum, a layer above both; tests/test_kernels.py checks that these mirror it.
"""

from __future__ import annotations

#: ``Role.ASSISTANT_END``: the code ``assistant_turns`` closes a turn on.
ASSISTANT_END = 8
