"""The Ray test session's cluster, tuned to notice lost and new nodes in seconds.

:func:`quick_shared_cluster` is :func:`accel_ray.testing.shared_cluster` with two changes
that only shorten Ray's waits (what the tests check is unchanged):

* the cluster's GCS health-checks each node every 0.5 s and counts it dead after 4 failed
  checks in a row (Ray's defaults: 3 s and 5), so a killed node is dead within ~2 s instead
  of ~15 s. A check still fails only when the raylet refuses the connection or stays
  silent for Ray's 10 s ``health_check_timeout_ms``, so a busy machine does not lose nodes;
* Ray's ``AutoscalingCoordinator`` (the detached actor that Ray Train's scaling policies ask
  which nodes can host workers) is created once, on the head node, before any run, with
  its view of the cluster refreshed every second instead of every 20 s. Without it, the
  first run's controller waits for the actor to start (5 s timeouts), an elastic run
  first retries the old size for a dead node (a worker-group start timeout), and a new
  node is only used up to 20 s later.

``python quick_cluster.py ADDRESS`` is the driver that creates that coordinator.
"""

from __future__ import annotations

import os
import subprocess
import sys

TICK_S = 1.0
"""How often the test cluster's AutoscalingCoordinator refreshes its view of the nodes."""
NODE_FAILURE_DETECTION = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_failure_threshold": "4",
}
"""Ray system settings (read from the environment of the GCS and the raylets)."""
QUICK_TRAIN = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5"}
"""For Ray Train drivers: the controller polls its workers every 0.5 s (Ray's default: 2 s)."""


def quick_shared_cluster():
    """The process's shared loopback cluster (started here on first use), tuned as above."""
    from accel_ray.testing import shared_cluster

    saved = {name: os.environ.get(name) for name in NODE_FAILURE_DETECTION}
    os.environ.update(NODE_FAILURE_DETECTION)  # inherited by the cluster's processes
    try:
        cluster = shared_cluster()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if not getattr(cluster, "quick_coordinator", False):
        done = subprocess.run(
            [sys.executable, __file__, cluster.address],
            env=cluster.environment(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        cluster.quick_coordinator = True
    return cluster


def _create_coordinator(address: str) -> None:
    """Create Ray's AutoscalingCoordinator as Ray Train would (same name, namespace and
    options, on this driver's node: the head), with a 1 s tick."""
    import ray
    from ray.data._internal.cluster_autoscaler import default_autoscaling_coordinator as module
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class QuickAutoscalingCoordinator(module._AutoscalingCoordinatorActor):
        TICK_INTERVAL_S = TICK_S

    ray.init(address=address, log_to_driver=False)
    actor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
    coordinator = (
        actor(QuickAutoscalingCoordinator)
        .options(
            name="AutoscalingCoordinator",
            namespace="AutoscalingCoordinator",
            get_if_exists=True,
            lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            ),
        )
        .remote()
    )
    ray.get(coordinator.get_reserved_resources.remote("accel-tests"), timeout=150)
    # the actor Ray Train will use is this one (fails loudly if Ray renames it)
    theirs = module.get_or_create_autoscaling_coordinator()
    assert theirs == coordinator, "Ray's AutoscalingCoordinator moved"
    ray.shutdown()


if __name__ == "__main__":
    _create_coordinator(sys.argv[1])
