"""Value converters for the number types 整数 and 数字 (spec §7.5): each takes a non-empty value and returns the
database value or raises :class:`~.errors.FieldError` with the reason.

Decisions:

* 数字 rounds extra decimals half away from zero to the field's scale, which is what PostgreSQL does when it stores
  a value into ``numeric(p,s)``; too many digits before the decimal point are refused.
* Numbers never carry magnitude words (万 亿 千 k M bn …), percent signs or exponents in text: refused, not converted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from .errors import FieldError

__all__ = ["FULLWIDTH", "INT_MAX", "INT_MIN", "MAX_NUMERIC_PRECISION", "numeric_converter", "to_int"]

MAX_NUMERIC_PRECISION = 1000  # PostgreSQL's limit for numeric(p,s)
FULLWIDTH = str.maketrans(
    {
        **{chr(0xFF10 + i): str(i) for i in range(10)},
        "，": ",",
        "．": ".",
        "－": "-",
        "−": "-",
        "＋": "+",
        "\u3000": " ",
        "％": "%",
    }
)


_MAGNITUDE_WORDS = ("万", "亿", "千", "百", "十", "bn", "BN", "Bn", "k", "K", "m", "M", "b", "B", "w", "W")


INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # the bigint range of an 整数
_INT_MIN, _INT_MAX = INT_MIN, INT_MAX


_FLOAT_EXACT = 2**53


_HAS_DECIMALS = "has decimals; an 整数 field takes whole numbers (use a 数字 field for decimals)"


def _number_text(raw: str) -> str:
    """Plain ASCII number text ``[-]digits[.digits]`` from user text, or FieldError.

    Full-width digits and signs become half-width; thousands separators are removed only when they group by three
    (``1,234,567``) so a decimal comma (``12,5``) is never misread; magnitude words, %, exponents are refused.
    """
    text = raw.strip()
    if not text.isascii():
        text = text.translate(FULLWIDTH).strip()
    sign = ""
    if text[:1] in ("-", "+"):
        sign, text = ("-" if text[0] == "-" else ""), text[1:]
    whole, dot, frac = text.partition(".")
    if "," in whole:
        groups = whole.split(",")
        if not (1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])):
            raise FieldError(
                f"{raw!r}: commas are read only as thousands separators (1,234,567); write decimals with a point"
            )
        whole = "".join(groups)
    if text.isascii() and (whole or frac) and (not whole or whole.isdigit()) and (not frac or frac.isdigit()):
        return sign + (whole or "0") + (dot + frac if frac else "")
    raise FieldError(_number_problem(raw))


def _number_problem(raw: str) -> str:
    text = raw.strip().translate(FULLWIDTH)
    has_digit = any(c.isdigit() for c in text)
    for word in _MAGNITUDE_WORDS:
        if has_digit and word in text:
            return (
                f"{raw!r} contains the magnitude word {word!r}, which is never converted; write the full number "
                "(e.g. 35000 for 3.5万, 1200 for 1.2k)"
            )
    if "%" in text:
        return f"{raw!r} has a percent sign; write the plain number (0.125 as a fraction, or 12.5 as points)"
    if "e" in text.lower() and has_digit:
        return f"{raw!r} is in exponent notation; write the number out in full"
    return f"{raw!r} is not a number; write digits, e.g. 12345 or 1,234.5"


def to_int(value: Any) -> int:
    cls = value.__class__
    result: int
    if cls is int:
        result = value
    elif cls is str:
        if len(value) < 19 and value.isdigit() and value.isascii():
            return int(value)  # the common case: plain digits, and fewer than 19 of them always fit a bigint
        text = _number_text(value)
        whole, _, frac = text.partition(".")
        if frac.strip("0"):
            raise FieldError(f"{value!r} {_HAS_DECIMALS}")
        result = int(whole)
    elif cls is float:
        if not math.isfinite(value):
            raise FieldError(f"{value!r} is not a number")
        if not value.is_integer():
            raise FieldError(f"{value!r} {_HAS_DECIMALS}")
        if abs(value) >= _FLOAT_EXACT:
            raise FieldError(f"{value!r} is too large to be exact as a floating-point number; pass it as text")
        result = int(value)
    elif cls is bool:
        raise FieldError(f"{value!r} is true/false, not a number")
    elif isinstance(value, int):
        result = int(value)
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise FieldError(f"{value!r} is not a number")
        if value != value.to_integral_value():
            raise FieldError(f"{value} {_HAS_DECIMALS}")
        result = int(value)
    else:
        raise FieldError(f"expected a whole number, got {type(value).__name__}")
    if not _INT_MIN <= result <= _INT_MAX:
        raise FieldError(f"{value!r} is outside the 整数 range (±9.2e18); use a 数字 field")
    return result


def numeric_converter(precision: int, scale: int) -> Callable[[Any], Decimal]:
    quantum = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)  # |value| must be < limit after rounding
    # rounding half away from zero, as PostgreSQL does when it stores into numeric(p,s); passed positionally
    # because keyword arguments make Decimal.quantize several times slower
    context = Context(
        prec=precision + 40,
        rounding=ROUND_HALF_UP,
        Emax=MAX_NUMERIC_PRECISION * 4,
        Emin=-MAX_NUMERIC_PRECISION * 4,
    )
    too_large = (
        f"is too large: numeric({precision},{scale}) holds at most {precision - scale} digits before the decimal "
        "point; widen the field's precision"
    )

    def convert(value: Any) -> Decimal:
        cls = value.__class__
        try:
            if cls is str:
                if value.isascii() and value.replace(".", "", 1).isdigit():
                    number = Decimal(value)  # the common case: plain digits with at most one point
                else:
                    number = Decimal(_number_text(value))
            elif cls is int:
                number = Decimal(value)
            elif cls is float:
                if not math.isfinite(value):
                    raise FieldError(f"{value!r} is not a number")
                number = Decimal(repr(value))  # shortest repr: 0.1 stays 0.1
            elif cls is bool:
                raise FieldError(f"{value!r} is true/false, not a number")
            elif isinstance(value, Decimal):
                if not value.is_finite():
                    raise FieldError(f"{value!r} is not a number")
                number = value
            elif isinstance(value, int):
                number = Decimal(int(value))
            else:
                raise FieldError(f"expected a number, got {type(value).__name__}")
            number = number.quantize(quantum, None, context)
        except InvalidOperation:
            raise FieldError(f"{value!r} {too_large}") from None
        if number.copy_abs() >= limit:  # copy_abs: abs() would round to the default 28 digits
            raise FieldError(f"{value!r} {too_large}")
        return number

    return convert
