"""accel-bnb: accel plugin: bitsandbytes 8-bit and 4-bit quantization."""
