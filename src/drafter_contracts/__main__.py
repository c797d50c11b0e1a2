"""``python -m drafter_contracts``: the command line of cli/main.py."""

import sys

from .cli.main import main

sys.exit(main())
