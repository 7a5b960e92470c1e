#!/usr/bin/env python3
"""`chronicle network clean-relations` under its old name: follower edges -> accounts.csv + relations.csv.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import clean_relations as main

if __name__ == "__main__":
    main()
