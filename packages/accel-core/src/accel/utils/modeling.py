"""Accelerate's ``accelerate.utils.modeling`` path: re-exports from the modules of each concept."""

from accel.big_model.device_map import get_module_size_with_ties  # noqa: F401
from accel.big_model.hooks import (  # noqa: F401
    get_state_dict_from_offload,
    get_state_dict_offloaded_model,
)
from accel.big_model.modeling import (  # noqa: F401
    _index_device,
    find_tied_parameters,
    named_module_tensors,
    retie_parameters,
    set_module_tensor_to_device,
)
from accel.checkpoint.weights import (  # noqa: F401
    ALIASES_KEY,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    id_tensor_storage,
    load_weights,
    save_weights,
    shard_state_dict,
    split_aliases,
)
from accel.compilation import compile_regions, has_repeated_blocks  # noqa: F401
from accel.sizes import parse_size  # noqa: F401
from accel.utils import __dir__, __getattr__  # noqa: E402, F401  (every other accel.utils name)
