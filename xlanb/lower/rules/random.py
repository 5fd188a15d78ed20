"""Lowering rules: random."""
