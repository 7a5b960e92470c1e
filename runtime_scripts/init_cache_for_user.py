#!/usr/bin/env python3
"""`chronicle network init-cache` under its old name: rebuild one account's home-timeline cache.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import init_cache as main

if __name__ == "__main__":
    main()
