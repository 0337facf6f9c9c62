"""Worker scripts of the conformance kit, started as real processes by torchrun or ``accel launch``."""
