"""Engine errors as Python exceptions.

Every error the engine reports is a :class:`Error` whose ``status`` is the engine's
ErrorCode name ("InvalidArgument", "Io", "Format", "Unsupported", "Internal",
"OutOfMemory", "Cancelled") and whose ``message`` is the engine's message (it names the
file, field, input or option). Each code has its subclass, which also derives from the
built-in exception a Python caller would catch for it.
"""


class Error(Exception):
    """An error reported by Petrel's engine."""

    status = "Internal"

    def __init__(self, message=""):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (type(self), (self.message,))


class InvalidArgumentError(Error, ValueError):
    """A caller's input is wrong (token ids, options, an input too long for the model)."""

    status = "InvalidArgument"


class IoError(Error, OSError):
    """A file could not be opened, read, mapped or written."""

    status = "Io"


class NotFoundError(IoError, FileNotFoundError):
    """A file to read does not exist."""


class FormatError(Error, ValueError):
    """A model (or prompt cache, or quality model) file is corrupt, hostile or inconsistent."""

    status = "Format"


class UnsupportedError(Error, NotImplementedError):
    """Valid, but not something this build or this API can do (named in the message)."""

    status = "Unsupported"


class InternalError(Error, RuntimeError):
    status = "Internal"


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed, or a request needs more memory than the engine allows."""

    status = "OutOfMemory"


class CancelledError(Error):
    """The work was cancelled (a petrel.CancelFlag was set)."""

    status = "Cancelled"


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, IoError, FormatError, UnsupportedError, InternalError,
                OutOfMemoryError, CancelledError)
}


def engine_error(status, message):
    """The exception for an engine error (called by the compiled module)."""
    return _BY_STATUS.get(status, InternalError)(message)
