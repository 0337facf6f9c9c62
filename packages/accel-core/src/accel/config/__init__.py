"""Config files in Accelerate's format: keys, validation, resolution and the launched settings."""
