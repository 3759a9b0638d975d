"""zerotrain's errors. The C++ engine's typed errors arrive as these classes, with the C++
message unchanged ("[config] zero_optimization.stage: ..."). Each is a zerotrain.Error and
also the closest built-in exception, so existing ``except ValueError`` code keeps working.
The package raises them the same way: ``raise ConfigError("zero_optimization.stage: ...")``
gets its "[config] " from the C++ error type the class stands for (zerotrain._ext fills
_COMPONENTS from _C.error_components()), never from a prefix typed here.
No imports: the extension module imports this file while raising."""

# {class name: the C++ error's component}, filled once _C is loaded.
_COMPONENTS = {}


class Error(Exception):
    """Base of every error zerotrain raises on purpose. `component`: the bracketed tag the
    message starts with (the C++ error's, or the class's own when None)."""

    def __init__(self, message="", component=None):
        if component is None:
            component = next((_COMPONENTS[c.__name__] for c in type(self).__mro__ if c.__name__ in _COMPONENTS),
                             "error")
        self.component = component
        prefix = f"[{component}] "
        # A message that has its prefix already (an error rebuilt from its args: pickled
        # across processes, copied) keeps the one it has.
        self.message = message[len(prefix):] if message.startswith(prefix) else message
        super().__init__(prefix + self.message)


class ConfigError(Error, ValueError):
    """A bad or inconsistent ds_config (or arguments that contradict it)."""


class UsageError(Error, ValueError):
    """A call the engine cannot honour as made (wrong order, wrong arguments)."""


class NotSupportedError(Error, NotImplementedError):
    """A valid request that zerotrain does not implement."""


class CommError(Error, RuntimeError):
    """Collectives, rendezvous, a peer that is gone."""


class CommTimeoutError(CommError, TimeoutError):
    """A collective or rendezvous that did not complete in time; names the missing ranks."""


class IoError(Error, OSError):
    """Files and disks."""


class CheckpointError(IoError):
    """A checkpoint that is missing, incomplete or damaged."""


class NumericsError(Error, RuntimeError):
    """Training cannot go on: fp16 gradients overflow at every loss scale, or gradients are
    not finite."""


class ResourceError(Error, MemoryError):
    """The machine lacks what the job needs: memory above all."""


class InternalError(Error, RuntimeError):
    """A zerotrain bug: please report it with the message."""


__all__ = [
    "Error", "ConfigError", "UsageError", "NotSupportedError", "CommError", "CommTimeoutError", "IoError",
    "CheckpointError", "NumericsError", "ResourceError", "InternalError",
]
