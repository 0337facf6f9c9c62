import contextlib, runpy, sys
import accel_ddp.backend as b
from accel.backends import Backend
b.DDPBackend.trigger_sync_in_backward = Backend.trigger_sync_in_backward  # the old, non-syncing behaviour
sys.argv = [sys.argv[0], *sys.argv[1:]]
runpy.run_path(sys.argv[1] if False else "trigger_sync_checks.py", run_name="__main__")
