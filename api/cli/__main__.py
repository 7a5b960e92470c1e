"""`python -m api.cli ...` is `chronicle ...`."""

from api.cli import chronicle

chronicle(prog_name="chronicle")
