"""Core's own backend and precisions, registered through the same hooks as any plugin."""
