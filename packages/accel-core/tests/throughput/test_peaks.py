"""The dense peak table: names torch reports, dtypes, and no number where none is sourced."""

from __future__ import annotations

import pytest
import torch
from accel.throughput import peaks

NAMES = {
    # name as torch.cuda.get_device_name() reports it -> (row, dense bf16 TFLOP/s)
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 989.5),
    "NVIDIA H100 PCIe": ("H100 PCIe", 756.5),
    "NVIDIA H100 NVL": ("H100 NVL", 835.5),
    "NVIDIA H200": ("H200 SXM", 989.5),
    "NVIDIA H200 NVL": ("H200 NVL", 835.5),
    "NVIDIA A100-SXM4-80GB": ("A100", 312.0),
    "NVIDIA A100 80GB PCIe": ("A100", 312.0),
    "NVIDIA A100-PCIE-40GB": ("A100", 312.0),
    "NVIDIA A10": ("A10", 125.0),
    "NVIDIA L4": ("L4", 121.0),
    "NVIDIA L40S": ("L40S", 362.05),
    "AMD Instinct MI300X": ("MI300X", 1307.4),
    "AMD Instinct MI250X": ("MI250X", 383.0),
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_device_name_finds_its_row_and_its_dense_bf16_peak(name):
    row, bf16 = NAMES[name]
    assert peaks.find_row(name).device == row
    assert peaks.peak_flops(name, "bf16") == pytest.approx(bf16 * 1e12)


def test_the_dtype_chooses_the_column_and_bf16_is_not_tf32():
    h100 = "NVIDIA H100 80GB HBM3"
    # the datasheet rounds each figure: 989 (TF32) and 1,979 (bf16) with sparsity
    assert peaks.peak_flops(h100, "bf16") == pytest.approx(989.5e12)
    assert peaks.peak_flops(h100, "tf32") == pytest.approx(494.5e12)
    assert peaks.peak_flops(h100, "fp8") == pytest.approx(2 * peaks.peak_flops(h100, "bf16"))
    assert peaks.peak_flops(h100, "fp32") == pytest.approx(67e12)
    with pytest.raises(ValueError, match="fp32, tf32, bf16, fp16, fp8"):
        peaks.peak_flops(h100, "float16")


def test_unknown_parts_and_missing_columns_have_no_peak():
    for name in ("NVIDIA A10G", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090", "cpu"):
        assert peaks.find_row(name) is None, name
        assert peaks.peak_flops(name, "bf16") is None
    # Volta runs no bf16 and no TF32 on its tensor cores
    assert peaks.peak_flops("Tesla V100-SXM2-16GB", "fp16") == pytest.approx(125e12)
    assert peaks.peak_flops("Tesla V100-PCIE-32GB", "fp16") == pytest.approx(112e12)
    assert peaks.peak_flops("Tesla V100S-PCIE-32GB", "fp16") == pytest.approx(130e12)
    assert peaks.peak_flops("Tesla V100-SXM2-16GB", "bf16") is None
    assert peaks.device_name("cpu") is None


def test_every_row_names_its_datasheet_and_is_dense():
    for row in peaks.PEAKS:
        assert "datasheet" in row.source, row
        assert set(row.tflops) <= set(peaks.DTYPES), row
        # dense bf16 is twice dense TF32 (up to the datasheets' rounding); a sparse bf16
        # figure beside a dense TF32 one would be four times it
        if "tf32" in row.tflops:
            assert 1.9 < row.tflops["bf16"] / row.tflops["tf32"] < 2.1, row


def test_compute_dtype_follows_the_run():
    assert peaks.compute_dtype("bf16") == "bf16"
    assert peaks.compute_dtype("fp16", torch.float32) == "fp16"
    assert peaks.compute_dtype("fp8") == "fp8"
    assert peaks.compute_dtype("no", torch.bfloat16) == "bf16"
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert peaks.compute_dtype("no", torch.float32) == "fp32"
        torch.set_float32_matmul_precision("high")
        assert peaks.compute_dtype(None, torch.float32) == "tf32"
    finally:
        torch.set_float32_matmul_precision(previous)
