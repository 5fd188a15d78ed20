"""Lowering rules: reduce."""
