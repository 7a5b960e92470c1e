#!/usr/bin/env python3
"""`chronicle slack backfill` under a script name: backfill a Slack workspace's history through the Web API (resumable).

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.slack import backfill as main

if __name__ == "__main__":
    main()
