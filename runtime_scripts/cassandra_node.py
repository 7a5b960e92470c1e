#!/usr/bin/env python3
"""`chronicle node` under its old name: manage Chronicle's Apache Cassandra 5.0 nodes on loopback.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.node import node as main

if __name__ == "__main__":
    main()
