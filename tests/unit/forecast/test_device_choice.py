"""torch's version and CUDA build read without loading torch (the baseline's daemon never loads
it): the same as torch's own `torch.__version__` and `torch.version.cuda` once it is loaded."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import sys
from trader.forecast.device_choice import DeviceChoice, torch_build
import trader.service.service  # the daemon's modules: none loads torch at import
read = torch_build()
described = DeviceChoice("cpu", "float32", "the baseline").describe()
assert "torch" not in sys.modules, "torch was loaded"
import torch
assert read == (torch.__version__, torch.version.cuda), (read, torch.__version__)
assert (described["torch"], described["cuda"]) == read
assert DeviceChoice("cpu", "float32", "x").device == torch.device("cpu")
"""


def test_torch_build_is_read_without_loading_torch_and_agrees_with_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
