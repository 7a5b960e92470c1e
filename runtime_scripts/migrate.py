#!/usr/bin/env python3
"""`chronicle migrate` under its old name: apply pending CQL migrations from cql/ to the keyspace.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.migrate import migrate as main

if __name__ == "__main__":
    main()
