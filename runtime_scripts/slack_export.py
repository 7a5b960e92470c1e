#!/usr/bin/env python3
"""`chronicle slack export` under a script name: export a Slack workspace's archive as a Slack export ZIP.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.slack import export as main

if __name__ == "__main__":
    main()
