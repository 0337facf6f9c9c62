"""Elastic resume: a checkpoint saved on N processes resumes on M (or with another batch size).

Everything that makes a resume independent of the saving run's layout lives here:

- :mod:`accel.elastic.position` - the checkpoint format of a data loader's position, a place
  in the epoch's *global* sample order (public, versioned);
- :mod:`accel.elastic.loader` - the mixin of prepared loaders that counts that position and
  turns a position saved on another layout into where this loader starts;
- :mod:`accel.elastic.plan` - the arithmetic of the step: accumulation steps re-derived from
  samples under ``GradientAccumulationPlugin(keep_global_batch_size=True)``, the step and
  schedule counters, and the one line a resized resume logs.

Used from elsewhere: ``CheckpointManager`` (:mod:`accel.checkpoint.manager`) reads the saved
positions and seeds the ranks a resize added with :func:`accel.rng.derived_seed`;
``Accelerator.save_state`` / ``load_state`` write and apply the plan. The user's guide is
``docs/elastic.md``.
"""
