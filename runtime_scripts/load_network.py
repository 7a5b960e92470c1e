#!/usr/bin/env python3
"""`chronicle network load` under its old name: load a cleaned network into the query tables.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import load as main

if __name__ == "__main__":
    main()
