"""Lowering rules: activations."""
