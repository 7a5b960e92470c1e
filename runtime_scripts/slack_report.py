#!/usr/bin/env python3
"""`chronicle slack report` under a script name: the weekly activity report (seed 000's channelstats report) of a
workspace: generated, stored, printed as JSON, HTML or Slack blocks, optionally posted to Slack.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.slack import report as main

if __name__ == "__main__":
    main()
