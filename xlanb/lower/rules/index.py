"""Lowering rules: index."""
