"""accel-deepspeed: accel plugin: DeepSpeed ZeRO 0-3 with offload, auto config filling and multi-node launchers."""
