#!/usr/bin/env python3
"""Extended QUIC Interop Runner command line (see `run.py --help`)."""

import sys

from interop_runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
