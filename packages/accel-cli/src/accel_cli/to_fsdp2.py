"""``accel to-fsdp2``: rewrite the ``fsdp_config`` of an FSDP1 config file for FSDP2.

The same command as ``accelerate to-fsdp2`` (same flags, same key mapping): keys FSDP2 keeps
are copied, ``fsdp_sharding_strategy`` becomes ``fsdp_reshard_after_forward`` (True for the
strategies that free the parameters after forward: FULL_SHARD and HYBRID_SHARD), keys FSDP2
has no use for are dropped with a note, unknown keys are kept, and ``fsdp_version`` becomes 2.
Torch-free.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import cast

from accel.catalog import FSDP_SHARDING_STRATEGIES

from .config_paths import config_to_read, config_to_write
from .parsing import Parser, UsageError

RESHARD_AFTER_FORWARD: dict[str, bool] = FSDP_SHARDING_STRATEGIES
"""``fsdp_reshard_after_forward`` for each FSDP1 sharding strategy (numbered 1-5 in this order)."""


def _strategies(reshard: bool) -> str:
    return ", ".join(name for name, frees in RESHARD_AFTER_FORWARD.items() if frees is reshard)


DESCRIPTION = f"""\
Convert a config file's FSDP1 settings (fsdp_config) to FSDP2, as `accelerate to-fsdp2` does.

fsdp_sharding_strategy becomes fsdp_reshard_after_forward ({_strategies(True)}: true;
{_strategies(False)}: false); fsdp_backward_prefetch,
fsdp_sync_module_states and fsdp_use_orig_params are removed in FSDP2 and
fsdp_forward_prefetch is not available there, so they are dropped (each with a note).
"""

RENAMED: dict[str, str] = {"fsdp_sharding_strategy": "fsdp_reshard_after_forward"}
"""FSDP1 keys FSDP2 spells differently."""

DROPPED: dict[str, str] = {
    "fsdp_backward_prefetch": "has been removed in FSDP2",
    "fsdp_backward_prefetch_policy": "has been removed in FSDP2",
    "fsdp_sync_module_states": "has been removed in FSDP2",
    "fsdp_use_orig_params": "has been removed in FSDP2",
    "fsdp_forward_prefetch": "is not yet implemented in FSDP2",
}
"""FSDP1 keys left out of an FSDP2 config, and why."""


def _reshard(value: object) -> object:
    """A sharding strategy (name in any case, or its number 1-5) as FSDP2's boolean."""
    names = list(RESHARD_AFTER_FORWARD)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(names):
        return RESHARD_AFTER_FORWARD[names[value - 1]]
    if isinstance(value, str):
        text = value.strip().upper()
        if text.isdigit() and 1 <= int(text) <= len(names):
            return RESHARD_AFTER_FORWARD[names[int(text) - 1]]
        return RESHARD_AFTER_FORWARD.get(text, value)
    return value


def convert_config_to_fsdp2(
    config: Mapping[str, object],
) -> tuple[dict[str, object], list[str]]:
    """``config`` with its ``fsdp_config`` converted to FSDP2, and notes on what changed.

    A config without ``fsdp_config``, or already at ``fsdp_version: 2``, comes back unchanged
    (with a note). ``config`` itself is not modified.
    """
    fsdp = cast("Mapping[str, object]", config.get("fsdp_config") or {})
    if not fsdp:
        return dict(config), ["no fsdp_config in the config file: nothing to convert"]
    if str(fsdp.get("fsdp_version", 1)).strip() == "2":
        return dict(config), [
            "the config already says fsdp_version: 2, so it is left as it is; if its keys "
            "still have FSDP1 names, set fsdp_version: 1 and run the command again"
        ]
    notes: list[str] = []
    converted: dict[str, object] = {}
    for key, value in fsdp.items():
        if key in DROPPED:
            notes.append(f"{key} {DROPPED[key]}: dropped")
            continue
        if key in ("fsdp_sharding_strategy", "fsdp_reshard_after_forward"):
            value = _reshard(value)
        converted[RENAMED.get(key, key)] = value
    converted["fsdp_version"] = 2
    return {**config, "fsdp_config": converted}, notes


def main(argv: list[str], prog: str = "accel to-fsdp2") -> int:
    """Run ``accel to-fsdp2``."""
    from accel.config.files import read_config_file, save_config_file

    parser = Parser(prog=prog, description=DESCRIPTION)
    parser.add_argument(
        "--config_file", metavar="PATH", required=True, help="the FSDP1 config file to convert"
    )
    parser.add_argument(
        "--output_file",
        metavar="PATH",
        help="where to write the converted config (default with --overwrite: the input file)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="allow writing over an existing file (the input file without --output_file)",
    )
    args = parser.parse_args(argv)
    source = config_to_read(args.config_file)
    if args.output_file is None and not args.overwrite:
        raise UsageError(
            "give --output_file PATH for the converted config, or --overwrite to rewrite "
            f"{args.config_file} in place"
        )
    target = config_to_write(args.output_file, "--output_file") if args.output_file else source
    if target.exists() and not args.overwrite:
        raise UsageError(
            f"--output_file {args.output_file} already exists; pass --overwrite to replace it"
        )
    converted, notes = convert_config_to_fsdp2(read_config_file(source))
    for note in notes:
        sys.stderr.write(f"{prog}: note: {note}\n")
    save_config_file(converted, target)
    print(f"FSDP2 configuration written to {target}")
    return 0
