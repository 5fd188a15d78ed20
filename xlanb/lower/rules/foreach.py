"""Lowering rules: foreach."""
