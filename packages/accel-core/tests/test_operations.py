"""accel.distributed.operations helpers on one process."""

from __future__ import annotations

import pytest
import torch
from accel.utils import CannotPadNestedTensorWarning, concatenate


def test_concatenate_of_one_non_tensor_returns_it():
    assert concatenate(["hello"]) == "hello"
    assert concatenate([3]) == 3
    assert concatenate([{"a": torch.ones(1), "note": "x"}])["note"] == "x"


def test_concatenate_of_several_non_tensors_raises():
    with pytest.raises(TypeError):
        concatenate(["a", "b"])


def test_concatenate_tensors_leaf_by_leaf():
    out = concatenate([{"x": torch.zeros(1, 2)}, {"x": torch.ones(2, 2)}])
    assert out["x"].shape == (3, 2)


def test_cannot_pad_nested_tensor_warning_is_a_user_warning():
    assert issubclass(CannotPadNestedTensorWarning, UserWarning)


def test_pad_across_processes_returns_a_nested_tensor_with_a_warning():
    """A nested tensor has per-component sizes (``shape`` raises on several processes)."""
    from accel.utils import pad_across_processes

    nested = torch.nested.nested_tensor([[1.0, 2.0, 3.0], [1.0]])
    with pytest.warns(CannotPadNestedTensorWarning):
        assert pad_across_processes(nested) is nested
    plain = torch.randn(4, 3)
    assert pad_across_processes(plain, dim=-1) is plain


def test_recursively_apply_names_the_type_the_function_and_the_test():
    from accel.utils import recursively_apply

    with pytest.raises(TypeError) as info:
        recursively_apply(torch.tensor, (torch.tensor(1), 1), error_on_other_type=True)
    assert str(info.value) == (
        "Unsupported types (<class 'int'>) passed to `tensor`. Only nested list/tuple/dicts "
        "of objects that are valid for `is_torch_tensor` should be passed."
    )
