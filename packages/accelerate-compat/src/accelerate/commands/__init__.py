"""Accelerate's command modules over accel's CLI (``accelerate config``, ``launch``, ``env``)."""
