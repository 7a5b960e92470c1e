#!/usr/bin/env python3
"""`chronicle network query` under its old name: answer Q1-Q6 of a follower network as JSON.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import query as main

if __name__ == "__main__":
    main()
