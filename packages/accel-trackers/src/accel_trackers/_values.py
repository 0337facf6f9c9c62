"""Values as the tracking libraries take them: Python numbers, plain configs, numpy images."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    import numpy as np

Values = Mapping[str, object]
"""What ``log`` / ``store_init_configuration`` receive: names to numbers, strings, tensors, dicts."""


def to_python(value: object) -> object:
    """``value`` with tensors / numpy scalars of one element turned into Python numbers, recursively.

    Larger tensors and arrays are left alone (image and histogram methods take them).
    """
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_python(v) for v in value)
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    size = numel() if callable(numel) else getattr(value, "size", None)
    if callable(item) and size == 1:
        try:
            return item()
        except Exception:
            return value
    return value


def python_values(values: Values) -> dict[str, object]:
    """``values`` as a new dict, each value through :func:`to_python`."""
    return {str(k): to_python(v) for k, v in values.items()}


def is_number(value: object) -> TypeGuard[float]:
    """A real number (int, float, numpy scalar, ...; bools excluded)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def plain_config(values: Mapping[str, object]) -> dict[str, object]:
    """``values`` with anything that is not a number, string, bool, None, list or dict as its ``str``."""

    def convert(value: object) -> object:
        if value is None or isinstance(value, (str, bool, int, float)):
            return value
        if isinstance(value, Mapping):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        return str(value)

    return {str(k): convert(v) for k, v in values.items()}


def flatten(values: Mapping[str, object], sep: str = "/", prefix: str = "") -> dict[str, object]:
    """Nested dicts as one level: ``{"a": {"b": 1}}`` -> ``{"a/b": 1}``."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, sep, name))
        else:
            flat[name] = value
    return flat


def image_list(images: object) -> list[object]:
    """One image or a list/batch of images as a list."""
    if isinstance(images, (list, tuple)):
        return list(images)
    if getattr(images, "ndim", None) == 4 and isinstance(images, Iterable):
        return list(images)
    return [images]


def to_numpy(image: object) -> np.ndarray:
    """An image (tensor or array-like, HW or HWC) as a numpy ``uint8`` array.

    Floating-point images are taken to be in [0, 1] and scaled to 0-255.
    """
    import numpy as np

    detach = getattr(image, "detach", None)
    if callable(detach):
        image = detach().cpu().numpy()
    array = np.asarray(image)
    if array.dtype.kind == "f":
        array = (np.clip(array, 0.0, 1.0) * 255).round()
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    return array
