"""tessera: spatial tensor parallelism for high-resolution convolutional networks.

The C++ core (tensors, layouts, halo plans, sharded ops, models, the trainer) and the simulator,
from Python. Everything here calls the same library code as the ``tessera`` command line; no
shape or halo math is re-derived in Python.

    >>> import numpy as np, tessera
    >>> mesh = tessera.DeviceMesh(sp=4)
    >>> layout = tessera.Layout(mesh, (2, 16, 32, 50), tessera.Shard(3))
    >>> layout.local_shape(3)
    (2, 16, 32, 12)

Submodules: :mod:`tessera.functional` (ops sharded over in-process ranks), :mod:`tessera.sim`
(topologies, simulation, planner), :mod:`tessera.plot` (matplotlib helpers).
"""

import os as _os

# An installed package carries the comm plugins its build made (tessera/plugins: ucx when UCX
# was found); the plugin loader searches TESSERA_PLUGIN_PATH, so add the folder after the user's.
_plugins = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins")
if _os.path.isdir(_plugins):
    _path = [p for p in _os.environ.get("TESSERA_PLUGIN_PATH", "").split(":") if p]
    if _plugins not in _path:
        _os.environ["TESSERA_PLUGIN_PATH"] = ":".join(_path + [_plugins])

from ._version import __version__, build_parts  # noqa: E402,F401  (written by CMake)
from ._tessera import (  # noqa: F401  (re-exported)
    BackendError,
    ConvSpec,
    DeviceMesh,
    Error,
    InternalError,
    InvalidArgument,
    Layout,
    ModelSpec,
    NonFiniteError,
    OutOfMemory,
    Partial,
    Placement,
    Replicate,
    Shard,
    Tensor,
    TimeoutError,
    Unsupported,
    conv_output_layout,
    from_numpy,
    halo_plan,
    model_preset,
    model_presets,
)
from . import functional, sim  # noqa: E402,F401
from .functional import distribute, gather  # noqa: E402,F401
from .images import add_restarts, images_info  # noqa: E402,F401
from .train import load_weights, train  # noqa: E402,F401

# tessera.TimeoutError (a subclass of the built-in) is left out of `import *`, which would
# otherwise shadow the built-in TimeoutError in the importing module.
__all__ = [
    "BackendError", "ConvSpec", "add_restarts", "images_info", "DeviceMesh", "Error", "InternalError", "InvalidArgument", "Layout",
    "ModelSpec", "NonFiniteError", "OutOfMemory", "Partial", "Placement", "Replicate", "Shard", "Tensor", "Unsupported", "conv_output_layout", "distribute", "from_numpy", "functional", "gather", "halo_plan",
    "load_weights", "model_preset", "model_presets", "sim", "train",
]
