"""``python -m accel_cli ...`` is ``accel ...``."""

from .main import main

main()
