"""Small helpers shared by the package's modules."""


def enum_member(enum_type, value, what):
    """The member of a bound C++ enum named ``value``; ValueError listing the names
    otherwise (``what`` names the argument)."""
    names = list(enum_type.__members__)
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, names))}, not {value!r}")
    return enum_type.__members__[value]
