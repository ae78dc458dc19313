"""Small helpers shared by the package's modules."""

import numbers

UINT64_MAX = 2**64 - 1
INT32_MAX = 2**31 - 1


def integer(value, what, low, high):
    """``value`` as an int in ``low..high``; InvalidArgumentError naming ``what``, the
    value and the range otherwise. A float, even 2.0, is refused rather than truncated,
    and a negative value is never wrapped into an unsigned field."""
    from shardpack._errors import InvalidArgumentError

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"{what} must be an integer from {low} to {high}, not {value!r}"
        )
    value = int(value)
    if not low <= value <= high:
        raise InvalidArgumentError(f"{what} must be an integer from {low} to {high}, not {value}")
    return value


def enum_member(enum_type, value, what):
    """The member of a bound C++ enum named ``value``; InvalidArgumentError (a ValueError) listing the names
    otherwise (``what`` names the argument)."""
    from shardpack._errors import InvalidArgumentError

    names = list(enum_type.__members__)
    if not isinstance(value, str) or value not in names:
        raise InvalidArgumentError(f"{what} must be one of {', '.join(map(repr, names))}, not {value!r}")
    return enum_type.__members__[value]


def parsed_name(parse, value, what):
    """``parse(value)`` for one of the library's name parsers (parse_resize_filter,
    parse_fit_mode); InvalidArgumentError naming ``what`` for anything else."""
    from shardpack._errors import InvalidArgumentError

    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a name (a str), not {value!r}")
    try:
        return parse(value)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{what}: {e}") from None
