#!/usr/bin/env python3
"""`chronicle network rankings` under its old name: the Q2 + Q3 job, append a top-100 snapshot.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import compute_rankings as main

if __name__ == "__main__":
    main()
