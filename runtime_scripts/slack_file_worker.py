#!/usr/bin/env python3
"""`chronicle slack file-worker` under its old name: fetch Slack files of archived messages into object storage.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.slack import file_worker as main

if __name__ == "__main__":
    main()
