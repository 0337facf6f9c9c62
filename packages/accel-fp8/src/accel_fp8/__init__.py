"""accel-fp8: accel plugin: FP8 training through torchao, TransformerEngine and MS-AMP."""
