"""The template → mask properties suite that ``pytest --masker=...`` runs (see :mod:`.context`)."""
