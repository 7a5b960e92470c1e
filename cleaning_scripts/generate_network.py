#!/usr/bin/env python3
"""`chronicle network generate` under its old name: write look-alike raw network files.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import generate as main

if __name__ == "__main__":
    main()
