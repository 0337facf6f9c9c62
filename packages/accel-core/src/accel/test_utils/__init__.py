"""Helpers for testing code that uses accel (devices present, skips naming the hardware)."""
