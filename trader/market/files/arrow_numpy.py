"""Fixed-width arrays between pyarrow and numpy through their buffers.

pyarrow's own numpy conversions import pandas (a third of a second the CLI need not spend):
fixed-width values without nulls go through their buffer instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def to_numpy(values: pa.Array, dtype: type[np.number[Any]]) -> Any:
    """A numpy view of `values` (fixed-width, no nulls) as `dtype`."""
    width = np.dtype(dtype).itemsize
    data = values.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=len(values), offset=values.offset * width)


def to_arrow(values: npt.NDArray[Any], kind: pa.DataType) -> pa.Array:
    """`values` as a pyarrow array of `kind` (no nulls)."""
    return pa.Array.from_buffers(
        kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))]
    )
