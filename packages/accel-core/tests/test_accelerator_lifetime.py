"""An Accelerator's prepared objects are freed with it, by reference counting alone."""

from __future__ import annotations

import gc
import pickle
import weakref

import torch
from accel import Accelerator
from torch.utils.data import DataLoader


def test_prepared_loader_is_freed_with_its_accelerator_without_the_collector():
    gc.collect()
    gc.disable()  # a reference cycle would keep them until the collector runs
    try:
        accelerator = Accelerator(cpu=True)
        loader = accelerator.prepare(DataLoader(list(range(16)), batch_size=4))
        assert next(iter(loader)).tolist() == [0, 1, 2, 3]
        refs = [weakref.ref(accelerator), weakref.ref(loader), weakref.ref(loader.gradient_state)]
        refs.append(weakref.ref(accelerator.prepared))
        del accelerator, loader
        assert [ref() for ref in refs] == [None] * len(refs)
    finally:
        gc.enable()


def test_a_pickled_accelerator_keeps_its_precision_bound():
    """The precision holds its context weakly; a pickled Accelerator carries both along."""
    accelerator = Accelerator(cpu=True)
    accelerator.prepare(torch.nn.Linear(2, 2))
    assert accelerator.backend_context.precision.context is accelerator.backend_context
    copy = pickle.loads(pickle.dumps(accelerator))
    assert copy.backend_context.precision.context is copy.backend_context
