"""A real out-of-memory error on CPU for tests: a process whose address space is capped.

:func:`capped_address_space` lowers this process's ``RLIMIT_AS`` soft limit to its current
address-space size plus a budget, so that an allocation beyond the budget makes PyTorch's CPU
allocator raise its own ``RuntimeError: ... DefaultCPUAllocator: can't allocate memory``, and
the process keeps running. Linux only (it reads ``/proc/self/status``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator


def address_space_bytes() -> int:
    """This process's current virtual address-space size (``VmSize`` of ``/proc/self/status``)."""
    with open("/proc/self/status") as status:
        found = re.search(r"^VmSize:\s+(\d+) kB", status.read(), re.MULTILINE)
    if found is None:
        raise RuntimeError("no VmSize in /proc/self/status: capping needs Linux")
    return int(found.group(1)) * 1024


@contextlib.contextmanager
def capped_address_space(budget_bytes: int) -> Generator[int, None, None]:
    """Within the block, allocations beyond ``budget_bytes`` more address space fail; yields the cap.

    Measure after a warm-up (the threads, allocator arenas and communication buffers the code
    under test creates count too). The hard limit is left alone, so the soft one is restored.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = address_space_bytes() + budget_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
