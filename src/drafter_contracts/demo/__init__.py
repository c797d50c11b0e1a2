"""What ``drafter-contracts demo`` needs: fixture conversations and the dataset rendered from them.

Installed with the package (the demo runs from an install, not a checkout); the project's own test
fixtures, mutants and corpora are not part of it (they live in the repository's ``drafter_testkit``).
"""
