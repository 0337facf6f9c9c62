"""MPI launcher of accel-cluster: ``mpirun`` with a host file for multi-CPU jobs."""
