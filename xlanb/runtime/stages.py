"""The compiled form of a graph, with JAX's stage vocabulary for introspection."""

from __future__ import annotations


class Compiled:
    """A compiled executable plus what it was lowered from.

    `as_text`, `cost_analysis` and `memory_analysis` are for visualisation and
    debugging, as in jax.stages; they return None where the backend gives nothing.
    """

    __slots__ = ("executable", "lowered", "n_floats", "n_ints", "name", "digest", "_texts")

    def __init__(self, executable, lowered, n_floats: int, n_ints: int, name: str, digest: str):
        self.executable, self.lowered = executable, lowered
        self.n_floats, self.n_ints, self.name, self.digest = n_floats, n_ints, name, digest
        self._texts: dict[str, str] = {}

    def as_text(self, stage: str = "stablehlo") -> str:
        if stage not in self._texts:
            if stage == "stablehlo":
                text = self.lowered.as_text()
            elif stage == "hlo":
                text = self.lowered.as_text(dialect="hlo")
            elif stage == "optimized":
                text = self.executable.as_text()
            else:
                raise ValueError(f"stage must be 'stablehlo', 'hlo' or 'optimized', got {stage!r}")
            self._texts[stage] = text
        return self._texts[stage]

    def cost_analysis(self) -> dict | None:
        try:
            cost = self.executable.cost_analysis()
        except Exception:   # backends without cost analysis raise assorted errors
            return None
        if isinstance(cost, list):
            cost = cost[0] if cost else None
        return dict(cost) if cost else None

    def memory_analysis(self) -> dict | None:
        try:
            mem = self.executable.memory_analysis()
        except Exception:   # as above: optional per backend
            return None
        if mem is None:
            return None
        fields = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                  "alias_size_in_bytes", "generated_code_size_in_bytes")
        return {f: getattr(mem, f) for f in fields if hasattr(mem, f)}
