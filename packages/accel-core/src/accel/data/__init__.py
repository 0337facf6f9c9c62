"""Prepared data loaders: sharding, dispatching, skipping and exact resume."""
