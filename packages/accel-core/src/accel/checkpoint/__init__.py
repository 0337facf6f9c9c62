"""Checkpoints: weight files, reading model checkpoints, the save_state layout and its orchestration."""
