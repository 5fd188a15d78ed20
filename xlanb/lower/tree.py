"""Argument structures split into array leaves and a hashable skeleton, and joined back.

    leaves = []; skeleton = split((args, kwargs), leaves)    # arrays -> Hole(i)
    args, kwargs = join(skeleton, leaves)

Tuples and lists keep their type; a dict becomes `Items` (a tuple of (key, value) pairs) so the
skeleton can key a memo; everything else stays as it is.
"""

from __future__ import annotations

import jax


class Hole:
    """Where the i-th array leaf goes."""
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i

    def __eq__(self, other):
        return type(other) is Hole and other.i == self.i

    def __hash__(self):
        return hash(("hole", self.i))


class Items(tuple):
    """A dict's (key, value) pairs inside a skeleton."""


def split(x, leaves: list):
    t = type(x)
    if isinstance(x, jax.Array):
        leaves.append(x)
        return Hole(len(leaves) - 1)
    if t is tuple or t is list:
        return t(split(y, leaves) for y in x)
    if t is dict:
        return Items((k, split(v, leaves)) for k, v in x.items())
    return x


def join(x, values):
    t = type(x)
    if t is Hole:
        return values[x.i]
    if t is Items:
        return {k: join(v, values) for k, v in x}
    if t is tuple or t is list:
        return t(join(y, values) for y in x)
    return x
