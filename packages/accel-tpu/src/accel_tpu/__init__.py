"""accel plugin: XLA devices (TPU) through torch_xla."""
