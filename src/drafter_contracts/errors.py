"""The exceptions every layer may raise: bad input (one line, exit code 4) and buffers the kernels must not see."""


class UsageProblem(Exception):
    """Bad input from the user (path, option, contract file, tokenizer).

    The message must say what is wrong and what to do, in one line: the pytest
    plugin re-raises it as ``pytest.UsageError`` so no traceback is shown.
    """


class InvalidBuffers(ValueError):
    """Buffers that C must not see (offsets outside the values, decreasing, ...).

    Raised by the kernel wrappers and by the shard reader's own re-check; the engine
    turns it into an ``arrow_integrity`` verdict for the shard, never a crash.
    """
