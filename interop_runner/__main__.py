"""``python -m interop_runner``: the same command line as ``./run.py`` and ``qir``."""

import sys

from interop_runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
