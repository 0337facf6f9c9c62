"""``accelerate.Accelerator``: accel's Accelerator with Accelerate's rules where the two differ.

Every library of the Hugging Face stack builds its accelerator as
``from accelerate import Accelerator``; this class gives them Accelerate's behaviour where
accel chose otherwise for its own API:

- FSDP on CPU processes: Accelerate applies FSDP only on accelerator devices and trains
  data-parallel on CPU (``Trainer(fsdp=...)`` then sees ``state.fsdp_plugin is None`` and
  reads full parameters after ``train()``); ``accel.Accelerator`` shards on CPU, and
  ``ACCEL_FSDP_ON_CPU=1`` makes this class shard there too.
"""

from __future__ import annotations

import accel


class Accelerator(accel.Accelerator):
    """accel's :class:`accel.Accelerator` with Accelerate's device rule for FSDP (see the module)."""

    fsdp_on_cpu = False
