"""Argument checks shared by the library: every failure is a ``ValueError`` that
names the argument and the allowed range, so a reader's typo reads as a sentence."""
from __future__ import annotations

import math
import numbers


def check_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {allowed}, got {value}")
    return value


def check_float(name: str, value, minimum: float = 0.0, strict: bool = False,
                maximum: float | None = None) -> float:
    """Return ``value`` as a finite float >= ``minimum`` (> if ``strict``), else ``ValueError``."""
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, numbers.Real) and \
            not (hasattr(value, "item") and getattr(value, "ndim", 1) == 0):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    low_ok = value > minimum if strict else value >= minimum
    high_ok = maximum is None or value <= maximum
    if not math.isfinite(value) or not low_ok or not high_ok:
        op = ">" if strict else ">="
        allowed = f"{op} {minimum}" + ("" if maximum is None else f" and <= {maximum}")
        raise ValueError(f"{name} must be a finite number {allowed}, got {value}")
    return value


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, else ``ValueError`` listing them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value
