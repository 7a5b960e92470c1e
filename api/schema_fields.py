"""A base for OpenAPI schemas (marshmallow) whose plain fields are listed by type, once.

Many objects Chronicle returns (and most of Slack's) carry a run of strings, integers and booleans with nothing
more to say about each than its type; declaring them one line each made every schema module a repetition of the
others. A field that needs a description, a validator or a nested type is still declared in the class body; a
schema whose plain fields differ in `required` or nullability derives from one base per kind.
"""

from __future__ import annotations

from marshmallow import Schema
from marshmallow import fields as mf


def plain_fields(strings: str = "", integers: str = "", booleans: str = "", floats: str = "", dicts: str = "", *,
                 required: bool = False, nullable: bool = False, base: type[Schema] = Schema) -> type[Schema]:
    """A subclass of `base` declaring the space-separated names as String, Integer, Boolean, Float, Dict fields
    (`required` and `nullable`: each of them required, each allowing null)."""
    kinds = ((strings, mf.String), (integers, mf.Integer), (booleans, mf.Boolean), (floats, mf.Float),
             (dicts, mf.Dict))
    options = {"required": True} if required else {}
    if nullable:
        options["allow_none"] = True
    return base.from_dict({name: kind(**options) for names, kind in kinds for name in names.split()})
