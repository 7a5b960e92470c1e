"""Slack activity reports (issue 10, seed 000 channelstats): the period, the figures, the store, the outputs.

period.py   which days a report covers and its id ({start_day}-{days})
figures.py  the reads of a period (a bounded set of partitions) and every figure, computed in one pass
store.py    stored reports: zstd JSON chunks under a generation, swapped atomically (owner of the tables)
render.py   the HTML page with server-side SVG charts
blocks.py   the Slack post (Block Kit, at most 50 blocks a message) and its delivery with chat.postMessage
anonymise.py stable fake names for sharing a report
service.py  generate / get / list / post: what the CLI and the HTTP endpoints call
"""
