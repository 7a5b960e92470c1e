"""A base for OpenAPI schemas (marshmallow) whose plain fields are listed by type, once.

Many objects Chronicle returns (and most of Slack's) carry a run of strings, integers and booleans with nothing
more to say about each than its type; declaring them one line each made every schema module a repetition of the
others. A field that needs a description, `required` or a nested type is still declared in the class body.
"""

from __future__ import annotations

from marshmallow import Schema
from marshmallow import fields as mf


def plain_fields(strings: str = "", integers: str = "", booleans: str = "", *,
                 base: type[Schema] = Schema) -> type[Schema]:
    """A subclass of `base` declaring the space-separated names as optional String, Integer, Boolean fields."""
    kinds = ((strings, mf.String), (integers, mf.Integer), (booleans, mf.Boolean))
    return base.from_dict({name: kind() for names, kind in kinds for name in names.split()})
