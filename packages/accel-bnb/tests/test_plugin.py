"""Registration: the quantizer plugin, the lazy ``accel.utils`` export, and light imports."""

from __future__ import annotations

import subprocess
import sys

from accel.plugins import registry


def test_registered_quantizer_and_export():
    import accel.utils
    from accel.quantization import quantizer_for
    from accel_bnb.config import BnbQuantizationConfig
    from accel_bnb.quantizer import BnbQuantizer

    assert registry.get_quantizer("bnb") is BnbQuantizer
    assert accel.utils.BnbQuantizationConfig is BnbQuantizationConfig
    assert isinstance(quantizer_for(BnbQuantizationConfig(load_in_8bit=True)), BnbQuantizer)
    assert registry.exports()["BnbQuantizationConfig"] == "accel_bnb:BnbQuantizationConfig"


def test_imports_stay_light():
    code = (
        "import sys, accel, accel_bnb, accel_bnb.plugin; "
        "print(sorted(m for m in ('torch', 'bitsandbytes') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
