"""Compile and run graphs on the PJRT device through JAX; move data to and from it."""
