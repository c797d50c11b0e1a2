"""The one exception type for bad input: turned into a single line and exit code 4."""


class UsageProblem(Exception):
    """Bad input from the user (path, option, contract file, tokenizer).

    The message must say what is wrong and what to do, in one line: the pytest
    plugin re-raises it as ``pytest.UsageError`` so no traceback is shown.
    """
