"""Exceptions raised by shardpack.

Every error of the C++ library arrives as a subclass of :class:`Error` chosen by its
status code, carrying the library's message unchanged (for data faults: the shard
file, the record number and its byte offset, and expected versus actual). Each class
also derives from the built-in exception a Python programmer would catch for that kind
of error, e.g. ``except FileNotFoundError`` catches a missing manifest.
"""

__all__ = [
    "Error",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "CorruptionError",
    "NotSupportedError",
    "ShardpackIOError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "OutOfRangeError",
    "InternalError",
    "UnavailableError",
    "PermissionDeniedError",
]


class Error(Exception):
    """Base class of shardpack's errors; ``code`` names the C++ StatusCode."""

    code = "Unknown"


class InvalidArgumentError(Error, ValueError):
    """An unusable argument: an option, a path, a loader state for another setup."""

    code = "InvalidArgument"


class NotFoundError(Error, FileNotFoundError):
    """A file or key that must exist does not (e.g. no manifest.json)."""

    code = "NotFound"


class AlreadyExistsError(Error, FileExistsError):
    """An output that must not exist does (convert into a dataset without overwrite)."""

    code = "AlreadyExists"


class CorruptionError(Error):
    """Data on disk is not what the format promises; the message names file, record
    and offset."""

    code = "Corruption"


class NotSupportedError(Error, NotImplementedError):
    """A valid input this build cannot handle (e.g. a newer manifest version)."""

    code = "NotSupported"


class ShardpackIOError(Error, OSError):
    """The operating system refused an operation (the message names errno)."""

    code = "IOError"


class ResourceExhaustedError(Error, RuntimeError):
    """A configured limit was hit (size, memory)."""

    code = "ResourceExhausted"


class FailedPreconditionError(Error, RuntimeError):
    """An API used out of order; from a loader: the ring slot the next batch needs is
    still held by a batch the program keeps (drop old batches' tensors)."""

    code = "FailedPrecondition"


class OutOfRangeError(Error, IndexError):
    """An index beyond the end."""

    code = "OutOfRange"


class InternalError(Error, RuntimeError):
    """A bug in shardpack or a C library misbehaving."""

    code = "Internal"


class UnavailableError(Error, RuntimeError):
    """A device or facility this machine or build does not offer (e.g. no CUDA device)."""

    code = "Unavailable"


class PermissionDeniedError(Error, PermissionError):
    """A server refused the credentials or what they allow (S3: AccessDenied,
    SignatureDoesNotMatch, InvalidAccessKeyId, ExpiredToken, ...)."""

    code = "PermissionDenied"


_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        AlreadyExistsError,
        CorruptionError,
        NotSupportedError,
        ShardpackIOError,
        ResourceExhaustedError,
        FailedPreconditionError,
        OutOfRangeError,
        InternalError,
        UnavailableError,
        PermissionDeniedError,
    )
}


def exception_class(code_name):
    """The exception class for a StatusCode name ("Corruption"); :class:`Error` for
    a name this module does not know. Called by the extension module."""
    return _BY_CODE.get(code_name, Error)
