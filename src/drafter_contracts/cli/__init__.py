"""The ``drafter-contracts`` command: ``init``, ``demo`` and ``merge-reports``.

``main``  the argument parser and the three subcommands (``python -m drafter_contracts`` runs it too)
``init``  ``drafter-contracts init``: read a known-good dataset once and write a contract pinned to it
"""
