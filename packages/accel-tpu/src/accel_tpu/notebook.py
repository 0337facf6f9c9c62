"""``notebook_launcher`` on XLA devices: the replicas are forked from the notebook by ``xmp.spawn``.

:func:`accel.notebook_launcher` comes here when the XLA launcher claims the notebook
(see :meth:`accel_tpu.launcher.XLALauncher.claims_notebook`). The function may be
defined in the notebook itself: the fork start method needs no pickling.
"""

from __future__ import annotations

from collections.abc import Callable

from accel import env_vars
from accel.launchers.notebook import patch_environment
from accel.plugins import registry

from .replica import spawn
from .settings import check_precision, xla_environment


def notebook_launch(
    function: Callable[..., object],
    args: tuple = (),
    num_processes: int | None = None,
    mixed_precision: str = "no",
) -> None:
    """Run ``function(*args)`` on every XLA device (one replica when ``num_processes`` is 1).

    The XLA runtime must not have been used in this notebook yet: each forked replica
    starts it for its own device.
    """
    import torch_xla

    if torch_xla._XLAC._xla_runtime_is_initialized():
        raise RuntimeError(
            "the XLA runtime was already started in this notebook, so replicas cannot be forked: "
            "restart the notebook and call notebook_launcher before using the XLA device "
            "(or creating an Accelerator)"
        )
    check_precision(registry.get_precision(mixed_precision))
    env = {
        env_vars.MIXED_PRECISION: mixed_precision,
        env_vars.DISTRIBUTED_TYPE: "XLA",
    }
    env.update(xla_environment({"num_processes": num_processes or 1}))
    with patch_environment(**env):
        spawn(function, args=args, num_processes=num_processes, start_method="fork")
