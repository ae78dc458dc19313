"""Small helpers shared by the package's modules."""


def enum_member(enum_type, value, what):
    """The member of a bound C++ enum named ``value``; ValueError listing the names
    otherwise (``what`` names the argument)."""
    names = list(enum_type.__members__)
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, names))}, not {value!r}")
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
