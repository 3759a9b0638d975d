"""Loads the extension module zerotrain._C, the C++ engine.

torch is imported first: _C links the libtorch (and libtorch_python) that torch loaded, so a
torch.Tensor reaches the engine as the same at::Tensor, with no copy. _C is loaded with
RTLD_GLOBAL so that the nccl plugin, which zerotrain loads on demand, binds to the engine's
functions inside it (as it binds to the `zerotrain` command's)."""

import os
import sys

import torch  # noqa: F401  (must come first, see above)

_flags = sys.getdlopenflags()
sys.setdlopenflags(_flags | os.RTLD_GLOBAL)
try:
    from . import _C  # noqa: E402
finally:
    sys.setdlopenflags(_flags)

from .errors import _COMPONENTS  # noqa: E402

_COMPONENTS.update(_C.error_components())   # every error's "[component]" is the C++ type's

__all__ = ["_C"]
