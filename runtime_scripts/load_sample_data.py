#!/usr/bin/env python3
"""`chronicle sample load` under its old name: load the built-in sample Slack workspace and follower network.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.sample import load as main

if __name__ == "__main__":
    main()
