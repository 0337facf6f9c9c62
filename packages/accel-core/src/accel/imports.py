"""What is installed and available: library probes, torch version checks, device availability.

Accelerate's ``is_*_available`` helpers under the same names. Library probes only look
for the package (``importlib.util.find_spec``), they never import it; device probes ask
torch. Nothing heavy is imported when this module is.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import operator
import platform
from collections.abc import Callable

from packaging.version import Version
from packaging.version import parse as parse_version

STR_OPERATION_TO_FUNC = {
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    "<": operator.lt,
}
"""The comparison operators :func:`compare_versions` accepts."""


def _found(*modules: str) -> bool:
    for module in modules:
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def installed_version(distribution: str, missing: str = "0+unknown") -> str:
    """The installed version of ``distribution`` (e.g. ``"accel-cli"``), or ``missing``.

    ``missing`` is returned when the distribution is not installed (a source tree on
    ``sys.path``, or an optional library that is absent).
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return missing


def compare_versions(
    library_or_version: str | Version, operation: str, requirement_version: str
) -> bool:
    """Compare a library's installed version (or a version) with ``requirement_version`` (``operation`` like ``">="``)."""
    if operation not in STR_OPERATION_TO_FUNC:
        raise ValueError(f"operation {operation!r}: use one of {', '.join(STR_OPERATION_TO_FUNC)}")
    if isinstance(library_or_version, str):
        library_or_version = parse_version(importlib.metadata.version(library_or_version))
    return STR_OPERATION_TO_FUNC[operation](library_or_version, parse_version(requirement_version))


def is_torch_version(operation: str, version: str) -> bool:
    """Whether the installed torch's version compares to ``version`` as ``operation`` says."""
    import torch

    return compare_versions(parse_version(torch.__version__.split("+")[0]), operation, version)


def _device_available(kind: str, check_device: bool = False) -> bool:
    import torch

    backend = getattr(torch, kind, None)
    available = getattr(backend, "is_available", None)
    if backend is None or available is None:
        return False
    try:
        if not available():
            return False
        return not check_device or backend.device_count() > 0
    except Exception:
        return False


def is_cuda_available() -> bool:
    """Whether a CUDA (or ROCm) device is usable."""
    return _device_available("cuda")


def is_mps_available(min_version: str = "1.12") -> bool:
    """Whether Apple's MPS backend is usable (torch >= ``min_version``)."""
    import torch

    return is_torch_version(">=", min_version) and torch.backends.mps.is_available()


def is_xpu_available(check_device: bool = False) -> bool:
    """Whether an Intel XPU is usable."""
    return _device_available("xpu", check_device)


def is_npu_available(check_device: bool = False) -> bool:
    """Whether an Ascend NPU is usable (torch_npu)."""
    return _found("torch_npu") and _device_available("npu", check_device)


def is_mlu_available(check_device: bool = False) -> bool:
    """Whether a Cambricon MLU is usable (torch_mlu)."""
    return _found("torch_mlu") and _device_available("mlu", check_device)


def is_musa_available(check_device: bool = False) -> bool:
    """Whether a Moore Threads MUSA device is usable (torch_musa)."""
    return _found("torch_musa") and _device_available("musa", check_device)


def is_sdaa_available(check_device: bool = False) -> bool:
    """Whether a Tecorigin SDAA device is usable (torch_sdaa)."""
    return _found("torch_sdaa") and _device_available("sdaa", check_device)


def is_hpu_available(init_hccl: bool = False) -> bool:
    """Whether an Intel Gaudi HPU is usable (habana_frameworks)."""
    if not _found("habana_frameworks"):
        return False
    if init_hccl:
        import habana_frameworks.torch.distributed.hccl  # noqa: F401
    return _device_available("hpu")


def is_habana_gaudi1() -> bool:
    """Whether the HPU is a first-generation Gaudi."""
    if not is_hpu_available():
        return False
    import habana_frameworks.torch.utils.experimental as htexp

    return htexp._get_device_type() == htexp.synDeviceType.synDeviceGaudi


def is_neuron_available(check_device: bool = False) -> bool:
    """Whether an AWS Neuron device is usable (torch_neuronx)."""
    return _found("torch_neuronx") and (not check_device or _device_available("neuron", True))


def is_torch_xla_available(check_is_tpu: bool = False, check_is_gpu: bool = False) -> bool:
    """Whether torch_xla is installed (and, with the checks, runs on a TPU / a GPU)."""
    if not _found("torch_xla"):
        return False
    if not (check_is_tpu or check_is_gpu):
        return True
    import torch_xla.runtime as xr

    device = xr.device_type()
    return (check_is_tpu and device == "TPU") or (check_is_gpu and device in ("GPU", "CUDA"))


def is_bf16_available(ignore_tpu: bool = False) -> bool:
    """Whether bf16 mixed precision can run here (CUDA with bf16, XPU, NPU, MPS on recent torch, CPU, TPU)."""
    import torch

    if is_torch_xla_available(check_is_tpu=True):
        return not ignore_tpu
    if is_cuda_available():
        return torch.cuda.is_bf16_supported()
    if is_mps_available():
        return is_torch_version(">=", "2.3")
    return True


def is_fp16_available() -> bool:
    """Whether fp16 mixed precision can run here (everywhere but first-generation Gaudi)."""
    return not is_habana_gaudi1()


def is_fp8_available() -> bool:
    """Whether an FP8 backend library (TransformerEngine, MS-AMP or torchao) is installed."""
    return is_transformer_engine_available() or _found("msamp") or _found("torchao")


def check_cuda_fp8_capability() -> bool:
    """Whether the first CUDA GPU can compute in FP8 (compute capability 8.9 or newer).

    False without a CUDA GPU. Asks ``nvidia-smi`` first, so that the check does not
    initialize CUDA in this process (a later fork, as ``notebook_launcher``'s, stays possible).
    """
    if not is_cuda_available():
        return False
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is not None:
        query = [smi, "--query-gpu=compute_capability", "--format=csv,noheader"]
        try:
            first = subprocess.run(query, capture_output=True, text=True, check=True).stdout
            major, minor = first.split()[0].split(".")
            return (int(major), int(minor)) >= (8, 9)
        except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
            pass
    import torch

    return torch.cuda.get_device_capability() >= (8, 9)


def is_transformer_engine_available() -> bool:
    """Whether NVIDIA TransformerEngine is installed."""
    return _found("transformer_engine")


def is_transformer_engine_mxfp8_available() -> bool:
    """Whether TransformerEngine can run MXFP8 (a Blackwell GPU and TransformerEngine >= 2.0)."""
    if not (is_transformer_engine_available() and is_cuda_available()):
        return False
    import torch

    return torch.cuda.get_device_capability() >= (10, 0) and compare_versions(
        "transformer_engine", ">=", "2.0"
    )


def is_rocm_available() -> bool:
    """Whether torch runs on AMD ROCm (HIP)."""
    import torch

    return torch.version.hip is not None


def is_xccl_available() -> bool:
    """Whether torch.distributed has the XCCL backend (Intel GPUs)."""
    import torch.distributed as dist

    return is_torch_version(">=", "2.7") and dist.is_available() and dist.is_xccl_available()


def is_weights_only_available() -> bool:
    """Whether ``torch.load(weights_only=True)`` exists (torch >= 2.4: always in accel)."""
    return is_torch_version(">=", "2.4.0")


def is_torchdata_stateful_dataloader_available() -> bool:
    """Whether torchdata's ``StatefulDataLoader`` is installed."""
    return _found("torchdata", "torchdata.stateful_dataloader")


def is_bnb_available(min_version: str | None = None) -> bool:
    """Whether bitsandbytes is installed (at least ``min_version``)."""
    if not _found("bitsandbytes"):
        return False
    return min_version is None or compare_versions("bitsandbytes", ">=", min_version)


def is_8bit_bnb_available() -> bool:
    """Whether bitsandbytes can quantize to 8 bits (>= 0.37.2)."""
    return is_bnb_available("0.37.2")


def is_4bit_bnb_available() -> bool:
    """Whether bitsandbytes can quantize to 4 bits (>= 0.39.0)."""
    return is_bnb_available("0.39.0")


def is_bitsandbytes_multi_backend_available() -> bool:
    """Whether bitsandbytes has its multi-backend support (non-CUDA devices)."""
    if not is_bnb_available():
        return False
    import bitsandbytes as bnb

    return "multi_backend" in getattr(bnb, "features", set())


def is_pynvml_available() -> bool:
    """Whether NVIDIA's management library bindings are installed."""
    return _found("pynvml") or _found("nvidia_ml_py")


def is_amdsmi_available() -> bool:
    """Whether AMD's SMI bindings are installed."""
    return _found("amdsmi")


def is_sagemaker_available() -> bool:
    """Whether the SageMaker SDK is installed."""
    return _found("sagemaker")


def _library_probe(module: str, pretty: str) -> Callable[[], bool]:
    def probe() -> bool:
        return _found(module)

    probe.__name__ = probe.__qualname__ = f"is_{pretty}_available"
    probe.__doc__ = f"Whether ``{module}`` is installed (looked up, not imported)."
    return probe


# Probes that only check that a library can be imported, written one per line so that grep
# and go-to-definition find each name.
is_aim_available = _library_probe("aim", "aim")
is_boto3_available = _library_probe("boto3", "boto3")
is_clearml_available = _library_probe("clearml", "clearml")
is_comet_ml_available = _library_probe("comet_ml", "comet_ml")
is_datasets_available = _library_probe("datasets", "datasets")
is_deepspeed_available = _library_probe("deepspeed", "deepspeed")
is_dvclive_available = _library_probe("dvclive", "dvclive")
is_import_timer_available = _library_probe("import_timer", "import_timer")
is_lomo_available = _library_probe("lomo_optim", "lomo")
is_matplotlib_available = _library_probe("matplotlib", "matplotlib")
is_megatron_lm_available = _library_probe("megatron", "megatron_lm")
is_mlflow_available = _library_probe("mlflow", "mlflow")
is_msamp_available = _library_probe("msamp", "msamp")
is_pandas_available = _library_probe("pandas", "pandas")
is_peft_available = _library_probe("peft", "peft")
is_pippy_available = _library_probe("torch.distributed.pipelining", "pippy")
is_pytest_available = _library_probe("pytest", "pytest")
is_rich_available = _library_probe("rich", "rich")
is_schedulefree_available = _library_probe("schedulefree", "schedulefree")
is_swanlab_available = _library_probe("swanlab", "swanlab")
is_timm_available = _library_probe("timm", "timm")
is_torchao_available = _library_probe("torchao", "torchao")
is_torchdata_available = _library_probe("torchdata", "torchdata")
is_torchvision_available = _library_probe("torchvision", "torchvision")
is_trackio_available = _library_probe("trackio", "trackio")
is_transformers_available = _library_probe("transformers", "transformers")
is_triton_available = _library_probe("triton", "triton")
is_wandb_available = _library_probe("wandb", "wandb")


def is_tensorboard_available() -> bool:
    """Whether TensorBoard (or tensorboardX) is installed."""
    return _found("tensorboard") or _found("tensorboardX")


def is_cpu_linux() -> bool:
    """Whether this is Linux on the CPU (used by the kernel-version check)."""
    return platform.system() == "Linux"


PROBES = sorted(
    name for name, value in dict(globals()).items() if name.startswith("is_") and callable(value)
)
"""Every probe this module defines."""
