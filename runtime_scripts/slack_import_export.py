#!/usr/bin/env python3
"""`chronicle slack import-export` under a script name: import a Slack export ZIP (streaming, resumable).

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.slack import import_export as main

if __name__ == "__main__":
    main()
