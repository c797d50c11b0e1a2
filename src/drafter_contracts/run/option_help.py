"""Option help texts that list what exists (built-in contracts, template profiles, contract names), read
from the registries that define them when ``pytest --help`` prints them.

``run/options.py`` is imported by every pytest run of every environment the package is installed in, and must
stay light; the registries import numpy and the tokenizer tables. So the listing is not computed when the
option is declared: the option's argparse action reads it when the help formatter asks for ``help``.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable


def listed(listing: Callable[[], str]) -> type[argparse.Action]:
    """A store action whose help is its declared text followed by ``listing()``, computed when printed."""

    class ListedStore(argparse.Action):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._head = ""
            super().__init__(*args, **kwargs)

        @property  # type: ignore[override]
        def help(self) -> str:
            try:
                tail = listing()
            except Exception as exc:  # a help text must never break pytest --help
                tail = f"(the list could not be read: {type(exc).__name__})"
            return f"{self._head} {tail}".strip()

        @help.setter
        def help(self, text: str | None) -> None:
            self._head = text or ""

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                     option_string: str | None = None) -> None:
            setattr(namespace, self.dest, values)

    return ListedStore


def listed_append(listing: Callable[[], str]) -> type[argparse.Action]:
    """:func:`listed` for a repeatable option (``action="append"``)."""
    base = listed(listing)

    class ListedAppend(base):  # type: ignore[valid-type, misc]
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                     option_string: str | None = None) -> None:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])

    return ListedAppend


def builtin_contracts() -> str:
    from ..contract import AUTO_CONTRACT, builtin_contracts as files

    return f"Built-in: {', '.join(sorted(files()))}; {AUTO_CONTRACT} (generic, convention learnt from the rows)."


def template_profiles() -> str:
    from ..spans import AUTO, profile_names

    return f"Built-in: {', '.join(n for n in profile_names() if n != AUTO)}."


def contract_names() -> str:
    from ..checks import registry
    from ..checks.gate import groups

    return f"Contracts: {', '.join(registry.specs())}; groups: {', '.join(groups())}."
