"""Joins the group, writes OUT/pid-rank<r>, then sleeps (until stopped): ``sleeper.py OUT``."""

import os
import sys
import time
from pathlib import Path

from accel import Accelerator

accelerator = Accelerator()
(Path(sys.argv[1]) / f"pid-rank{accelerator.process_index}").write_text(str(os.getpid()))
time.sleep(600)
