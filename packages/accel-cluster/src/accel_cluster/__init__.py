"""accel-cluster: accel plugin: MPI, SLURM and SageMaker launchers."""
