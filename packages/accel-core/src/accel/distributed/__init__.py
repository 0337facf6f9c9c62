"""Collectives across processes: gather, reduce, broadcast, padding, and moving nested data."""
