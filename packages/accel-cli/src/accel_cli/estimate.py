"""``accel estimate-memory``: the memory a model needs, from a model built on the meta device.

The model is built without memory (``torch.device("meta")``) from:

* a local folder with ``config.json`` or a ``config.json`` file — with transformers
  when it is installed (any architecture), else with accel's own builders for
  common architectures (BERT, GPT-2, Llama, Mistral, Qwen2);
* a Hub id, through transformers or timm, when the Hub can be reached.

Sizes are reported like Accelerate: largest layer, total size, and training with
Adam (4x the total) for each dtype, as a text table, a Markdown table or JSON (``--format``).
Several models are estimated in turn, with a progress bar on a terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from accel.sizes import convert_bytes

from .parsing import Parser, UsageError

if TYPE_CHECKING:
    import torch
    from torch import nn

DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "int8": 1.0, "int4": 0.5}
DEFAULT_DTYPES = ["float32", "float16", "int8", "int4"]


FORMATS = ("table", "markdown", "json")


class SizeRow(TypedDict):
    """One dtype's sizes in bytes."""

    dtype: str
    largest_layer: float
    total_size: float
    training_using_adam: float


class Report(TypedDict):
    """One model's estimate: its name, where its config came from, and a row per dtype."""

    model: str
    source: str
    rows: list[SizeRow]


def main(argv: list[str], prog: str = "accel estimate-memory") -> int:
    """Print the memory table of one model or several (``--format table|markdown|json``)."""
    parser = Parser(
        prog=prog,
        description="Estimate the memory needed to load (and train with Adam) a model, by "
        "building it on the meta device: no weights are downloaded or allocated. Several "
        "models are estimated in turn (with a progress bar on a terminal).",
    )
    parser.add_argument(
        "model_name",
        nargs="+",
        help="Hub id, local folder with config.json, or a config.json file (one or more)",
    )
    parser.add_argument(
        "--library_name",
        metavar="{transformers,timm}",
        help="library the model comes from (default: guessed; transformers for config.json)",
    )
    parser.add_argument(
        "--dtypes",
        nargs="+",
        metavar="DTYPE",
        default=DEFAULT_DTYPES,
        help=f"dtypes to report (default: {' '.join(DEFAULT_DTYPES)}); also bfloat16",
    )
    parser.add_argument(
        "--trust_remote_code", action="store_true", help="allow the model's own code (transformers)"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="output: a text table (default), a Markdown table, or JSON (one object per model; "
        "a list for several models)",
    )
    parser.add_argument("--json", action="store_true", help="same as --format json")
    args = parser.parse_args(argv)
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} disagree: give one of them")
    fmt = "json" if args.json else (args.format or "table")
    for dtype in args.dtypes:
        if dtype not in DTYPE_BYTES:
            raise UsageError(
                f"--dtypes: {dtype!r} is not supported; use some of {', '.join(DTYPE_BYTES)}"
            )
    if args.library_name not in (None, "transformers", "timm"):
        raise UsageError(
            f"--library_name {args.library_name!r} is not supported; use transformers or timm"
        )
    from accel.progress import progress_bar

    reports = []
    for name in progress_bar(list(args.model_name), "Estimating memory", unit="model"):
        model, origin = build_empty_model(name, args.library_name, args.trust_remote_code)
        reports.append(estimate(name, origin, model, args.dtypes))
        del model
    print(render(reports, fmt))
    return 0


def estimate(name: str, origin: str, model: nn.Module, dtypes: list[str]) -> Report:
    """``{"model", "source", "rows"}``: per dtype, the largest layer, total size and training
    with Adam (4x the total), in bytes."""
    largest, total = model_sizes(model)
    rows: list[SizeRow] = []
    for dtype in dtypes:
        scale = DTYPE_BYTES[dtype] / 4.0
        rows.append(
            {
                "dtype": dtype,
                "largest_layer": largest * scale,
                "total_size": total * scale,
                "training_using_adam": total * scale * 4,
            }
        )
    return {"model": name, "source": origin, "rows": rows}


def render(reports: list[Report], fmt: str) -> str:
    """The reports of :func:`estimate` as ``fmt``: ``table``, ``markdown`` or ``json``."""
    if fmt == "json":
        return json.dumps(reports[0] if len(reports) == 1 else reports, indent=2)
    if fmt == "markdown":
        return "\n\n".join(_markdown(r["model"], r["rows"]) for r in reports)
    return "\n".join(
        f"Loading pretrained config for `{r['model']}` from {r['source']}...\n"
        + _table(r["model"], r["rows"])
        for r in reports
    )


def _cells(rows: list[SizeRow]) -> list[list[str]]:
    return [
        [
            r["dtype"],
            convert_bytes(r["largest_layer"]),
            convert_bytes(r["total_size"]),
            convert_bytes(r["training_using_adam"]),
        ]
        for r in rows
    ]


HEADER = ["dtype", "Largest Layer", "Total Size", "Training using Adam"]


def _markdown(name: str, rows: list[SizeRow]) -> str:
    lines = [
        f"Memory usage for loading `{name}`:",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(HEADER) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(c) + " |" for c in _cells(rows)]
    return "\n".join(lines)


def _table(name: str, rows: list[SizeRow]) -> str:
    header = HEADER
    cells = _cells(rows)
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(4)]
    title = f"Memory Usage for loading `{name}`"
    inner = sum(widths) + 3 * 3 + 2
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [
        "+" + "-" * inner + "+",
        "|" + title.center(inner) + "|",
        line,
        "| " + " | ".join(h.center(w) for h, w in zip(header, widths)) + " |",
        line,
    ]
    for c in cells:
        out.append("| " + " | ".join(v.center(w) for v, w in zip(c, widths)) + " |")
    out.append(line)
    return "\n".join(out)


# --------------------------------------------------------------------------- sizes


def _byte_size(tensor: torch.Tensor) -> float:
    return float(tensor.numel() * tensor.element_size())


def model_sizes(model: nn.Module) -> tuple[float, float]:
    """``(largest layer, total)`` in bytes, each tensor at its own dtype (float32 weights).

    The largest layer is the biggest leaf module or block that must not be split
    (``model._no_split_modules``), as for a ``device_map``.
    """
    no_split = set(getattr(model, "_no_split_modules", None) or [])

    def size(module: nn.Module) -> float:
        seen: set[int] = set()
        total = 0.0
        for t in [*module.parameters(), *module.buffers()]:
            if id(t) not in seen:
                seen.add(id(t))
                total += _byte_size(t)
        return total

    total = size(model)
    largest = 0.0
    stack = [model]
    while stack:
        module = stack.pop()
        own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if own:
            largest = max(largest, sum(_byte_size(t) for t in own))
        for child in module.children():
            if type(child).__name__ in no_split or not list(child.children()):
                largest = max(largest, size(child))
            else:
                stack.append(child)
    return largest, total


# --------------------------------------------------------------------------- building


def _local_config(name: str) -> Path | None:
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "config.json").is_file():
            return path / "config.json"
        raise UsageError(f"{path} is a folder without config.json; point at the model's folder")
    return None


def build_empty_model(
    name: str, library: str | None, trust_remote_code: bool
) -> tuple[nn.Module, str]:
    """The model on the meta device, and where its config came from."""
    import importlib.util

    config_path = _local_config(name)
    has_transformers = importlib.util.find_spec("transformers") is not None
    if library == "timm":
        return _timm_model(name, config_path), "timm"
    if config_path is not None:
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{config_path}: not a readable JSON config ({exc})") from None
        if not isinstance(config, dict):
            raise UsageError(f"{config_path}: a model config must be a JSON object")
        if has_transformers and (library == "transformers" or library is None):
            try:
                return _transformers_from_dict(config, trust_remote_code), f"`{config_path}`"
            except UsageError:
                raise
            except Exception:
                pass  # fall back to accel's own builders below
        return _builtin_model(config, str(config_path)), f"`{config_path}` (accel builder)"
    if has_transformers and library in (None, "transformers"):
        return _transformers_from_hub(name, trust_remote_code), "the Hugging Face Hub"
    raise UsageError(
        f"{name!r} is not a local folder or config.json, and loading it from the Hub "
        "needs transformers (pip install transformers) or --library_name timm with timm installed"
    )


def _meta() -> torch.device:
    import torch

    return torch.device("meta")


def _transformers_from_dict(config: dict, trust_remote_code: bool) -> nn.Module:
    from transformers import AutoConfig, AutoModel

    model_type = config.get("model_type")
    if not model_type:
        raise UsageError("config.json has no model_type; cannot tell which architecture to build")
    cfg = AutoConfig.for_model(**config)
    with _meta():
        return AutoModel.from_config(cfg, trust_remote_code=trust_remote_code)


def _transformers_from_hub(name: str, trust_remote_code: bool) -> nn.Module:
    from transformers import AutoConfig, AutoModel

    try:
        cfg = AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise UsageError(
            f"cannot load the config of {name!r} from the Hub ({type(exc).__name__}); "
            "check the name and the network, or pass a local folder with config.json"
        ) from None
    with _meta():
        return AutoModel.from_config(cfg, trust_remote_code=trust_remote_code)


def _timm_model(name: str, config_path: Path | None) -> nn.Module:
    try:
        import timm
    except ImportError:
        raise UsageError("--library_name timm needs timm: pip install timm") from None
    arch = name
    if config_path is not None:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        arch = config.get("architecture") or config.get("model_name") or name
    with _meta():
        try:
            return timm.create_model(arch, pretrained=False)
        except Exception as exc:
            raise UsageError(f"timm cannot build {arch!r}: {exc}") from None


# --------------------------------------------------------------------------- accel's builders


def _builtin_model(config: dict, origin: str) -> nn.Module:
    model_type = str(config.get("model_type", "")).lower()
    builders = {
        "bert": _bert,
        "gpt2": _gpt2,
        "llama": _llama,
        "mistral": _llama,
        "qwen2": _llama,
    }
    if model_type not in builders:
        raise UsageError(
            f"{origin}: model_type {model_type or 'missing'!r} needs transformers to be built "
            f"(pip install transformers); without it accel builds {', '.join(sorted(builders))}"
        )
    try:
        with _meta():
            return builders[model_type](config)
    except KeyError as exc:
        raise UsageError(f"{origin}: {model_type} config lacks {exc.args[0]!r}") from None


def _embedding(num: int, dim: int) -> nn.Embedding:
    """An nn.Embedding without initialisation (normal_ on meta is slow the first time)."""
    import torch
    from torch import nn

    return nn.Embedding(num, dim, _weight=torch.empty(num, dim))


def _bert(c: dict) -> nn.Module:
    import torch
    from torch import nn

    h, inter = c["hidden_size"], c["intermediate_size"]

    class BertLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
            self.attention_output = nn.Linear(h, h)
            self.attention_norm = nn.LayerNorm(h)
            self.intermediate = nn.Linear(h, inter)
            self.output = nn.Linear(inter, h)
            self.output_norm = nn.LayerNorm(h)

    class BertModel(nn.Module):
        _no_split_modules = ["BertLayer"]

        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = _embedding(c["vocab_size"], h)
            self.position_embeddings = _embedding(c.get("max_position_embeddings", 512), h)
            self.token_type_embeddings = _embedding(c.get("type_vocab_size", 2), h)
            self.embeddings_norm = nn.LayerNorm(h)
            positions = c.get("max_position_embeddings", 512)
            self.register_buffer("position_ids", torch.zeros(1, positions, dtype=torch.long))
            self.register_buffer("token_type_ids", torch.zeros(1, positions, dtype=torch.long))
            self.layer = nn.ModuleList(BertLayer() for _ in range(c["num_hidden_layers"]))
            self.pooler = nn.Linear(h, h)

    return BertModel()


def _gpt2(c: dict) -> nn.Module:
    from torch import nn

    h = c.get("n_embd", c.get("hidden_size"))
    if h is None:
        raise KeyError("n_embd")
    inner = c.get("n_inner") or 4 * h

    class GPT2Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(h)
            self.c_attn = nn.Linear(h, 3 * h)
            self.attn_proj = nn.Linear(h, h)
            self.ln_2 = nn.LayerNorm(h)
            self.c_fc = nn.Linear(h, inner)
            self.mlp_proj = nn.Linear(inner, h)

    class GPT2Model(nn.Module):
        _no_split_modules = ["GPT2Block"]

        def __init__(self) -> None:
            super().__init__()
            self.wte = _embedding(c["vocab_size"], h)
            self.wpe = _embedding(c.get("n_positions", 1024), h)
            self.h = nn.ModuleList(GPT2Block() for _ in range(c.get("n_layer", 12)))
            self.ln_f = nn.LayerNorm(h)

    return GPT2Model()


def _llama(c: dict) -> nn.Module:
    import torch
    from torch import nn

    h, inter = c["hidden_size"], c["intermediate_size"]
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or h // heads
    qkv_bias = c.get("model_type") == "qwen2" or bool(c.get("attention_bias", False))
    mlp_bias = bool(c.get("mlp_bias", False))

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(h))

    class DecoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj = nn.Linear(h, heads * head_dim, bias=qkv_bias)
            self.k_proj = nn.Linear(h, kv * head_dim, bias=qkv_bias)
            self.v_proj = nn.Linear(h, kv * head_dim, bias=qkv_bias)
            self.o_proj = nn.Linear(heads * head_dim, h, bias=bool(c.get("attention_bias", False)))
            self.gate_proj = nn.Linear(h, inter, bias=mlp_bias)
            self.up_proj = nn.Linear(h, inter, bias=mlp_bias)
            self.down_proj = nn.Linear(inter, h, bias=mlp_bias)
            self.input_layernorm = RMSNorm()
            self.post_attention_layernorm = RMSNorm()

    class DecoderModel(nn.Module):
        _no_split_modules = ["DecoderLayer"]

        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = _embedding(c["vocab_size"], h)
            self.layers = nn.ModuleList(DecoderLayer() for _ in range(c["num_hidden_layers"]))
            self.norm = RMSNorm()
            self.rotary_emb = RotaryEmbedding()

    class RotaryEmbedding(nn.Module):
        """The rotary frequencies transformers keeps as buffers (counted by its estimate too)."""

        def __init__(self) -> None:
            super().__init__()
            half = int(head_dim * c.get("partial_rotary_factor", 1.0)) // 2
            self.register_buffer("inv_freq", torch.empty(half), persistent=False)
            self.register_buffer("original_inv_freq", torch.empty(half), persistent=False)

    return DecoderModel()
