"""Lowering rules: factory."""
