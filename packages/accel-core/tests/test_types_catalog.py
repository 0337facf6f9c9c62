"""The enums spelled out for type checkers in ``accel.types`` match those built from the catalog."""

from __future__ import annotations

import ast
import inspect

import pytest
from accel import types


def _declared_for_type_checkers() -> dict[str, dict[str, str]]:
    tree = ast.parse(inspect.getsource(types))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    declared = {}
    for cls in block.body:
        assert isinstance(cls, ast.ClassDef)
        declared[cls.name] = {
            stmt.targets[0].id: stmt.value.value
            for stmt in cls.body
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
        }
    return declared


@pytest.mark.parametrize(
    "name", ["DistributedType", "PrecisionType", "DynamoBackend", "LoggerType"]
)
def test_static_enum_matches_catalog(name: str) -> None:
    runtime = getattr(types, name)
    expected = {member: runtime[member].value for member in runtime.__members__}
    assert _declared_for_type_checkers()[name] == expected
