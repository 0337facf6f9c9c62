"""Amazon SageMaker launcher of accel-cluster: the config file becomes a SageMaker training job."""
