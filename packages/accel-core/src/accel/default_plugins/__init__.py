"""Core's own backend, precisions and local launchers, registered through the same hooks as any plugin."""
