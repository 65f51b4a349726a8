"""Array backends: NumPy (default), PyTorch (CPU or CUDA), CuPy and array-api-strict.

:func:`resolve` turns the command line's ``--backend/--device/--dtype`` into a
:class:`Backend`, which builds arrays in that namespace and hands results back as NumPy.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from rankwall._backend_table import BACKEND_TABLE as BACKEND_TABLE  # the one table (re-exported)
from rankwall._backend_table import LIBRARIES, MODULES
from rankwall._backend_table import BackendSpec as BackendSpec
from rankwall.checks.engine.tolerance import dtype_name
from rankwall.errors import BackendUnavailable  # re-exported: the classes live in rankwall.errors

#: The library names ``--backend`` accepts, read from :data:`BACKEND_TABLE`.
BACKENDS = LIBRARIES
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Backend:
    """A namespace, a device and a dtype to compute in."""

    name: str
    xp: Any
    device: Any
    dtype: Any

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    def asarray(self, values: Any) -> Any:
        """``values`` (NumPy or nested sequences) in this backend's namespace, dtype and device."""
        return self.xp.asarray(np.asarray(values, dtype=np.float64), dtype=self.dtype, device=self.device)

    def describe(self) -> dict[str, str]:
        return {"backend": self.name, "device": str(self.device), "dtype": self.dtype_name}


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy copy of an array from any supported backend."""
    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if array_api_compat.is_numpy_array(x):
        return x
    return np.from_dlpack(x)


def singular_values(x: Any) -> np.ndarray:
    """The singular values of a matrix, computed in its own namespace, dtype and device
    (``linalg.svdvals`` of the array API), returned as float64 NumPy in descending order."""
    xp = array_api_compat.array_namespace(x)
    return to_numpy(xp.linalg.svdvals(x)).astype(np.float64)


def float64_copy(x: Any) -> np.ndarray:
    """A float64 NumPy copy of a backend array: the same values, read exactly (every float32 is a float64)."""
    return to_numpy(x).astype(np.float64)


def installed(name: str) -> bool:
    """Whether the library behind a backend name can be imported."""
    return importlib.util.find_spec(MODULES.get(name, name)) is not None


def cuda_available() -> bool:
    """Whether a CUDA device is usable (through torch or cupy)."""
    if installed("torch"):
        import torch

        if torch.cuda.is_available():
            return True
    if installed("cupy"):
        try:
            import cupy

            return cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:
            return False
    return False


def resolve(name: str = "numpy", device: str | None = None, dtype: str = "float64") -> Backend:
    """The backend for a name, a device (``cpu``, ``cuda``, or for array-api-strict one of its
    named devices) and a dtype name."""
    if name not in BACKENDS:
        raise BackendUnavailable(f"--backend: unknown backend {name!r} (choose from {', '.join(BACKENDS)})")
    if dtype not in DTYPES:
        raise BackendUnavailable(f"--dtype: unknown dtype {dtype!r} (choose from {', '.join(DTYPES)})")
    if not installed(name):
        raise BackendUnavailable(f"--backend: {name} is not installed")
    if name == "numpy":
        if device not in (None, "cpu"):
            raise BackendUnavailable(f"--device: numpy runs on the cpu only, not {device!r}")
        xp = array_api_compat.array_namespace(np.empty(0))
        return Backend(name, xp, "cpu", getattr(xp, dtype))
    if name == "torch":
        import torch

        try:
            chosen = torch.device(device or "cpu")
        except (RuntimeError, TypeError):
            raise BackendUnavailable(f"--device: torch has no device {device!r} (cpu, cuda or cuda:N)") from None
        if chosen.type not in ("cpu", "cuda"):
            raise BackendUnavailable(f"--device: rankwall runs torch on cpu or cuda, not {device!r}")
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise BackendUnavailable("--device: torch sees no CUDA device")
        if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
            raise BackendUnavailable(f"--device: {device} does not exist ({torch.cuda.device_count()} CUDA devices)")
        if chosen.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        xp = array_api_compat.array_namespace(torch.empty(0))
        return Backend(name, xp, chosen, getattr(torch, dtype))
    if name == "cupy":
        if device not in (None, "cuda") and not str(device).startswith("cuda"):
            raise BackendUnavailable(f"--device: cupy runs on cuda only, not {device!r}")
        if not cuda_available():
            raise BackendUnavailable("--backend: cupy is installed but sees no CUDA device")
        import cupy

        xp = array_api_compat.array_namespace(cupy.empty(0))
        return Backend(name, xp, cupy.cuda.Device(), getattr(cupy, dtype))
    import array_api_strict as xp

    named = {str(d).split("'")[1]: d for d in xp.__array_namespace_info__().devices()}
    chosen = named.get(device or "CPU_DEVICE") if device != "cpu" else named["CPU_DEVICE"]
    if chosen is None:
        raise BackendUnavailable(f"--device: array-api-strict has no device {device!r} ({', '.join(named)})")
    if dtype == "float64" and "float64" not in xp.__array_namespace_info__().dtypes(device=chosen):
        raise BackendUnavailable(f"--dtype: device {device} of array-api-strict has no float64")
    return Backend(name, xp, chosen, getattr(xp, dtype))
