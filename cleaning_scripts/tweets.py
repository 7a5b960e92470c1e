#!/usr/bin/env python3
"""`chronicle network clean-posts` under its old name: posts CSV -> posts.csv + likes.csv.

`--help` lists its options and exit codes. Needs Chronicle installed (`pip install -e .`, done by bootstrap.sh).
"""

from api.cli.network import clean_posts as main

if __name__ == "__main__":
    main()
