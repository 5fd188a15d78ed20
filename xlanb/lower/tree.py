"""Argument structures split into array leaves and a hashable skeleton, and joined back.

    leaves = []; skeleton = split((args, kwargs), leaves)    # arrays -> Hole(i)
    args, kwargs = join(skeleton, leaves)

Tuples keep their type; a list becomes `Listed` and a dict `Items` (a tuple of (key, value) pairs),
so that the skeleton can key a memo (a view's sizes, a cat's or a foreach op's tensors are lists),
and join gives back the list and the dict. A Python number becomes `Number`, which tells 1 from 1.0
and True, and 0.0 from -0.0, as a rule may (a memo must not serve one for the other); everything
else stays as it is.
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


class Listed(tuple):
    """A list's elements inside a skeleton (hashable, and not equal to a tuple of the same elements)."""

    def __eq__(self, other):
        return type(other) is Listed and tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("list", tuple(self)))


class Number:
    """A Python number inside a skeleton: equal to another only of the same type and the same repr."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Number and type(other.v) is type(self.v) and repr(other.v) == repr(self.v)

    def __hash__(self):
        return hash((type(self.v), repr(self.v)))


_NUMBERS = (int, float, bool, complex)


def split(x, leaves: list):
    t = type(x)
    if isinstance(x, jax.Array):
        leaves.append(x)
        return Hole(len(leaves) - 1)
    if t is tuple:
        return tuple(split(y, leaves) for y in x)
    if t is list:
        return Listed(split(y, leaves) for y in x)
    if t is dict:
        return Items((k, split(v, leaves)) for k, v in x.items())
    if t in _NUMBERS:
        return Number(x)
    return x


def join(x, values):
    t = type(x)
    if t is Hole:
        return values[x.i]
    if t is Number:
        return x.v
    if t is Items:
        return {k: join(v, values) for k, v in x}
    if t is Listed:
        return [join(y, values) for y in x]
    if t is tuple:
        return tuple(join(y, values) for y in x)
    return x
