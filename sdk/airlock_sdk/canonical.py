"""RFC 8785 (JSON Canonicalization Scheme) for verifying snapshot signatures without a dependency."""

from __future__ import annotations

import json
import math
from typing import Any


def _number(value: float) -> str:
    # ECMAScript Number.prototype.toString, which RFC 8785 prescribes for every number.
    if not math.isfinite(value):
        raise ValueError("NaN and infinities are not JSON")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    integer, _, fraction = mantissa.partition(".")
    digits = (integer + fraction.rstrip("0")).lstrip("0") if fraction.rstrip("0") else integer.lstrip("0")
    # position of the decimal point relative to the first significant digit
    point = len(integer.lstrip("0")) if integer.lstrip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    point += int(exponent or 0)
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    exp = point - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{'+' if exp > 0 else '-'}{abs(exp)}"


def _encode(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool | str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for position, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be"))):
            if position:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for position, item in enumerate(value):
            if position:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def canonical_json(value: Any) -> bytes:
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode("utf-8")
