"""SLURM host-list expansion over the formats SLURM writes, and the malformed ones it never does."""

from __future__ import annotations

import pytest
from accel.errors import ConfigError
from accel_cluster.slurm.nodelist import expand_nodelist

GRID = [
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("a,b", ["a", "b"]),
    ("gpu-[1-2]", ["gpu-1", "gpu-2"]),
    ("localhost", ["localhost"]),
    ("node7", ["node7"]),
    ("node[8-11]", ["node8", "node9", "node10", "node11"]),
    ("node[08-11]", ["node08", "node09", "node10", "node11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("node[1]", ["node1"]),
    ("node[3,1]", ["node3", "node1"]),
    ("gpu[1-2],cpu[10-11]", ["gpu1", "gpu2", "cpu10", "cpu11"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("node[1-2].cluster.local", ["node1.cluster.local", "node2.cluster.local"]),
    ("10.0.0.[1-3]", ["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    ("a-[1-2],b,c[5]", ["a-1", "a-2", "b", "c5"]),
    (" node[1-2] ", ["node1", "node2"]),
    ("x[0-1,3-4]y", ["x0y", "x1y", "x3y", "x4y"]),
]


@pytest.mark.parametrize(("text", "hosts"), GRID, ids=[t for t, _ in GRID])
def test_expands_like_scontrol_show_hostnames(text, hosts):
    assert expand_nodelist(text) == hosts


BAD = [
    ("", "empty host list"),
    ("node[1-2", "'[' without ']'"),
    ("node1-2]", "']' without '['"),
    ("node[[1]]", "nested"),
    ("node[]", "empty brackets"),
    ("node[a-b]", "is not a number or a range"),
    ("node[5-3]", "goes backwards"),
    ("a,,b", "empty entry"),
    ("node[1-2],node2", "appears twice"),
    ("a,a", "appears twice"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[t or "empty" for t, _ in BAD])
def test_malformed_lists_name_the_variable_and_the_problem(text, message):
    with pytest.raises(ConfigError) as info:
        expand_nodelist(text, "SLURM_JOB_NODELIST")
    assert str(info.value).startswith("SLURM_JOB_NODELIST: ")
    assert message in str(info.value)
