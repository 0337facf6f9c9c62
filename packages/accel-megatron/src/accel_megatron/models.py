"""Building megatron-core models that match the plugin (this process's pipeline stage and tensor shard)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.errors import ConfigError

from .config import MegatronLMPlugin

if TYPE_CHECKING:
    from accel.precision import Precision
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer.spec_utils import ModuleSpec


def _plugin_and_precision(
    plugin: MegatronLMPlugin | None,
) -> tuple[MegatronLMPlugin, Precision | str]:
    """The plugin (``plugin=``, else the active Accelerator's) and the precision of its run
    (``"no"`` before it is attached to one)."""
    if plugin is None:
        # build_gpt_model is a public helper that user code calls without a context: with no
        # plugin= it finds the one the Accelerator was given in the process-wide state, the
        # documented exception of this package (docs/design.md, "One owner per piece of state")
        from accel.state import AcceleratorState

        plugin = getattr(AcceleratorState.current(), "megatron_lm_plugin", None)
    if plugin is None:
        raise ValueError(
            "build_gpt_model needs the MegatronLMPlugin: create the Accelerator first or pass plugin="
        )
    precision = plugin.precision  # the run's, read from the context it is attached to
    return plugin, precision if precision is not None else "no"


def build_gpt_model(
    vocab_size: int,
    max_sequence_length: int,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    plugin: MegatronLMPlugin | None = None,
    **config_kwargs: object,
) -> GPTModel:
    """A megatron-core ``GPTModel`` for this process: its pipeline stage, its tensor-parallel shard.

    Call after creating the ``Accelerator`` (megatron-core's groups must exist). The
    layer spec is megatron-core's local (pure PyTorch) one, or TransformerEngine's when
    it is installed. ``config_kwargs`` go to ``TransformerConfig`` (``ffn_hidden_size``,
    ``hidden_dropout``, ...).
    """
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel

    plugin, precision = _plugin_and_precision(plugin)
    spec = _layer_spec(plugin)
    config = plugin.transformer_config(
        precision,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        **config_kwargs,
    )
    return GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=vocab_size,
        max_sequence_length=max_sequence_length,
        pre_process=ps.is_pipeline_first_stage(),
        post_process=ps.is_pipeline_last_stage(),
    )


def _layer_spec(plugin: MegatronLMPlugin) -> ModuleSpec:
    from megatron.core.models.gpt import gpt_layer_specs

    try:
        import transformer_engine.pytorch  # noqa: F401

        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec()
    except Exception:  # TE absent or half-installed (raises RuntimeError/OSError, not ImportError)
        pass
    if plugin.sequence_parallelism:
        raise ConfigError(
            "megatron_lm_sequence_parallelism=true needs TransformerEngine (CUDA) layer norms: "
            "megatron-core's local layer spec uses torch LayerNorm, which cannot split the sequence; "
            "install transformer-engine on a GPU machine or turn sequence parallelism off"
        )
    return gpt_layer_specs.get_gpt_layer_local_spec()
