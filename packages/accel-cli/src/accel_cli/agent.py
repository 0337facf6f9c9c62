"""``python -m accel_cli.agent -m torch.distributed.run ARGS``: torchelastic's agent, without torch's failure report.

When a worker fails, ``torch.distributed.run`` ends by raising ``ChildFailedError``: a
traceback of the agent's own stack followed by every rank's error file (about 30 lines),
after an ERROR log line about copying the error file. ``accel launch`` prints its own
summary instead (:mod:`accel_cli.supervise`), so ``supervise`` runs the agent through this
module, which ends it with the status torch's uncaught exception gives (1) and prints
neither. ``accel launch --debug`` runs ``torch.distributed.run`` directly, report included.

With a c10d rendezvous (``--nnodes MIN:MAX``) the rendezvous store lives in the agent of the
endpoint's node: when that agent is lost, every other agent fails at its next rendezvous with
torch's ``RendezvousConnectionError`` (a traceback). This module ends such an agent quietly
with :data:`RENDEZVOUS_LOST`, and ``supervise`` says in one line what happened and what to do.
"""

from __future__ import annotations

import logging
import sys

AGENT_MODULE = "torch.distributed.run"
"""The module this wrapper runs: the torchelastic agent."""
RENDEZVOUS_LOST = 3
"""Exit status of the wrapped agent when the rendezvous endpoint can no longer be reached."""


def main(argv: list[str] | None = None) -> None:
    """Run ``torch.distributed.run`` with ``argv`` (after ``-m torch.distributed.run``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] != ["-m", AGENT_MODULE]:
        sys.stderr.write(f"usage: python -m accel_cli.agent -m {AGENT_MODULE} [ARGS...]\n")
        raise SystemExit(2)
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    # the error-file copy is part of torch's report: the worker already printed its traceback
    logging.getLogger("torch.distributed.elastic.multiprocessing.errors.error_handler").setLevel(
        logging.CRITICAL
    )
    sys.argv = [run.__file__, *argv[2:]]
    try:
        run.main(argv[2:])
    except ChildFailedError:
        raise SystemExit(1) from None
    except RendezvousConnectionError:
        raise SystemExit(RENDEZVOUS_LOST) from None


if __name__ == "__main__":
    main()
