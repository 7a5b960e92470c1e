"""Slack activity reports (issue 10, seed 000 channelstats): the period, the figures, the store, the outputs.

period.py   which days a report covers and its id ({start_day}-{days})
figures.py  the reads of a period (a bounded set of partitions) and every figure, computed in one pass
store.py    stored reports: zstd JSON chunks under a generation, named by the index row's pointer; report job
            states (owner of the tables)
jobs.py     generation as a queued job (work queue `slack_reports`) and the report worker
render.py   the HTML page with server-side SVG charts
blocks.py   the Slack post (Block Kit, at most 50 blocks a message) and its delivery with chat.postMessage
anonymise.py stable fake names for sharing a report
service.py  generate / submit / run_job / job / get / list / post: what the CLI, HTTP and the worker call
"""
