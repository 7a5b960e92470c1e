"""What the node modules share: their errors and the default progress logger."""

from __future__ import annotations


class NodeError(RuntimeError):
    """A node could not be fetched, started or stopped; the message says what to do about it."""


class PrerequisiteError(NodeError):
    """Something the node needs is missing (Java, Maven, disk space, a free port, the download)."""


def say(message: str) -> None:
    print(message, flush=True)
