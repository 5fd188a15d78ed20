"""Graph breaks and guard failures, as DynamoBreak events (dynamo logs them; this listens)."""

from __future__ import annotations


def install_listeners() -> None:
    pass
