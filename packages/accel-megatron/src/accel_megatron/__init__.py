"""accel-megatron: accel plugin: Megatron-LM tensor, pipeline and sequence parallelism through megatron-core."""
