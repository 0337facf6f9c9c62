"""Dense peak FLOP/s per device and compute dtype: the denominator of MFU.

Every row names the vendor datasheet its figures come from. Only *dense* figures are
kept: NVIDIA's Hopper, Ada and L4 datasheets print the tensor-core figures *with 2:4
sparsity* (marked ``*``), so the dense figure is half of the printed one; the A100, A10
and L40S datasheets print both and the dense one is used; Volta has no sparsity. A device
missing here (a CPU, an A10G, which NVIDIA publishes no datasheet for, any newer part) has
no peak: MFU is then unknown unless the user gives one
(``ThroughputKwargs(peak_flops=...)``). Nothing is guessed.

The dtype is the one the matrix multiplications run in (:func:`compute_dtype`): ``bf16``
for a bf16 run, never the TF32 figure (pytorch/torchtitan#668); ``tf32`` only for an fp32
run whose float32 matmuls are allowed to use TF32; else ``fp32``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

TERA = 1e12

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""The compute dtypes a peak may be given for."""


@dataclass(frozen=True)
class PeakRow:
    """One device of the table: how its name is recognised, its dense peaks, their source."""

    device: str
    """The device, as the datasheet names it."""
    pattern: str
    """Regular expression matched (case-insensitively) against the name torch reports."""
    tflops: dict[str, float] = field(hash=False)
    """Dense peak TFLOP/s by compute dtype (a dtype the part does not run on tensor cores
    at all, such as bf16 on a V100, is absent)."""
    source: str = ""
    """The datasheet (vendor, document title) the figures come from, and how they were read."""

    def matches(self, name: str) -> bool:
        """Whether ``name`` (``torch.cuda.get_device_name()``) is this device."""
        return re.search(self.pattern, name, re.IGNORECASE) is not None


_HALF = "sparse figures (marked *) halved"
PEAKS: tuple[PeakRow, ...] = (
    # Hopper. The order matters: NVL and PCIe before the SXM part, whose name
    # ("NVIDIA H100 80GB HBM3") has no form factor (\bH200\b does not match a GH200).
    PeakRow(
        "H100 NVL",
        r"\bH100\b.*\bNVL\b",
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column; {_HALF}",
    ),
    PeakRow(
        "H100 PCIe",
        r"\bH100\b.*\bPCIe\b",
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column; {_HALF}",
    ),
    PeakRow(
        "H100 SXM",
        r"\bH100\b",
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column; {_HALF}",
    ),
    PeakRow(
        "H200 NVL",
        r"\bH200\b.*\bNVL\b",
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5},
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column; {_HALF}",
    ),
    PeakRow(
        "H200 SXM",
        r"\bH200\b",
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0},
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column; {_HALF}",
    ),
    # Ampere: SXM4 and PCIe, 40 and 80 GB, have the same peaks.
    PeakRow(
        "A100",
        r"\bA100\b",
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        "NVIDIA A100 Tensor Core GPU datasheet; dense figures (the sparse ones are marked *)",
    ),
    PeakRow(
        "A10",
        r"\bA10\b",  # not the A10G, which has no NVIDIA datasheet
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
        "NVIDIA A10 Tensor Core GPU datasheet; dense figures (the sparse ones are marked *)",
    ),
    # Ada
    PeakRow(
        "L40S",
        r"\bL40S\b",
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
        "NVIDIA L40S GPU datasheet; dense figures (the sparse ones are marked *)",
    ),
    PeakRow(
        "L4",
        r"\bL4\b",
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5},
        f"NVIDIA L4 Tensor Core GPU datasheet; {_HALF}",
    ),
    # Volta: no bf16, no TF32; "Tensor Performance" is the fp16 tensor-core figure.
    PeakRow(
        "V100S PCIe",
        r"\bV100S\b",
        {"fp32": 16.4, "fp16": 130.0},
        "NVIDIA V100 Tensor Core GPU datasheet, V100S PCIe column (Volta has no sparsity)",
    ),
    PeakRow(
        "V100 PCIe",
        r"\bV100\b.*\bPCIE\b",
        {"fp32": 14.0, "fp16": 112.0},
        "NVIDIA V100 Tensor Core GPU datasheet, V100 PCIe column (Volta has no sparsity)",
    ),
    PeakRow(
        "V100 SXM2",
        r"\bV100\b",
        {"fp32": 15.7, "fp16": 125.0},
        "NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2 column (Volta has no sparsity)",
    ),
    # AMD CDNA 3 / 2: the datasheets print dense figures, sparse ones separately.
    PeakRow(
        "MI325X",
        r"\bMI325X\b",
        {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
        "AMD Instinct MI325X accelerator datasheet; dense figures (matrix, without sparsity)",
    ),
    PeakRow(
        "MI300X",
        r"\bMI300X\b",
        {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
        "AMD Instinct MI300X accelerator datasheet; dense figures (matrix, without sparsity)",
    ),
    PeakRow(
        "MI250X",
        r"\bMI250X\b",
        {"fp32": 95.7, "bf16": 383.0, "fp16": 383.0},
        "AMD Instinct MI250X accelerator datasheet; matrix figures (CDNA 2 has no sparsity)",
    ),
)
"""The table, searched in order (the first row whose pattern matches the name wins)."""


def find_row(device_name: str) -> PeakRow | None:
    """The row of the device called ``device_name``, or None when the table does not know it."""
    for row in PEAKS:
        if row.matches(device_name):
            return row
    return None


def peak_flops(device_name: str, dtype: str) -> float | None:
    """Dense peak FLOP/s of ``device_name`` computing in ``dtype`` (see :data:`DTYPES`), or None.

    None when the device is not in the table or has no figure for that dtype: never a
    guess.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    row = find_row(device_name)
    if row is None or dtype not in row.tflops:
        return None
    return row.tflops[dtype] * TERA


def compute_dtype(mixed_precision: str | None, parameter_dtype: torch.dtype | None = None) -> str:
    """The dtype a run's matrix multiplications run in, as a key of the table.

    ``mixed_precision`` (``no``, ``fp16``, ``bf16``, ``fp8``) decides; without it, a model
    whose parameters are bf16 / fp16 (``parameter_dtype``) computes in that; an fp32 run
    computes in TF32 only where torch allows it (``torch.backends.cuda.matmul.allow_tf32``
    or a float32 matmul precision other than ``highest``).
    """
    import torch

    mode = str(getattr(mixed_precision, "value", mixed_precision) or "no").lower()
    if mode in ("bf16", "fp16", "fp8"):
        return mode
    if parameter_dtype == torch.bfloat16:
        return "bf16"
    if parameter_dtype == torch.float16:
        return "fp16"
    matmul = torch.backends.cuda.matmul  # older torch: allow_tf32; newer: fp32_precision
    if (
        torch.get_float32_matmul_precision() != "highest"
        or getattr(matmul, "fp32_precision", None) == "tf32"
        or getattr(matmul, "allow_tf32", False)
    ):
        return "tf32"
    return "fp32"


def device_name(device: torch.device | str) -> str | None:
    """The name torch reports for ``device`` (a CUDA or ROCm GPU), else None (CPU, MPS, ...)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(device)


__all__ = ["DTYPES", "PEAKS", "PeakRow", "compute_dtype", "device_name", "find_row", "peak_flops"]
