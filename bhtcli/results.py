"""JSON-safe conversion shared by every result object's to_dict()."""
from __future__ import annotations

import math

import numpy as np


def json_safe(obj):
    """Plain Python values only: no numpy scalars; NaN and Infinity become None."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj
