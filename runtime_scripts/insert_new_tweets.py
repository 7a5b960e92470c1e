#!/usr/bin/env python3
"""`chronicle network post` under its old name: Q5, write new posts and fan them out to followers' caches.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import post as main

if __name__ == "__main__":
    main()
