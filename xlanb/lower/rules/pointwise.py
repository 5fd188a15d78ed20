"""Lowering rules: pointwise."""
