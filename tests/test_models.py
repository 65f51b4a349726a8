"""Loading real models and heads offline (rankwall.checks.models.loading)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.models import loading
from rankwall.theory import expressivity as ex
from rankwall.theory.validation import InputError

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None,
    reason=f"SmolLM2 is not installed ({loading.INSTALL_HINT})",
)
needs_safetensors = pytest.mark.skipif(importlib.util.find_spec("safetensors") is None, reason="needs safetensors")


@needs_safetensors
class TestHeadFiles:
    def test_safetensors_file_with_a_bias(self, tmp_path):
        from safetensors.numpy import save_file

        W, b = np.arange(12.0).reshape(4, 3), np.array([1.0, 2.0, 3.0, 4.0])
        save_file(
            {"lm_head.weight": W.astype(np.float32), "lm_head.bias": b.astype(np.float32)}, tmp_path / "h.safetensors"
        )
        loaded, bias, name = loading.load_head(tmp_path / "h.safetensors")
        assert np.array_equal(loaded, W) and np.array_equal(bias, b) and name == "h.safetensors"

    def test_model_folder_with_a_tied_head(self, tmp_path):
        from safetensors.numpy import save_file

        W = np.random.default_rng(0).standard_normal((6, 2)).astype(np.float32)
        (tmp_path / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))
        save_file({"model.embed_tokens.weight": W}, tmp_path / "model.safetensors")
        loaded, bias, _ = loading.load_head(tmp_path)
        assert np.array_equal(loaded, W.astype(np.float64)) and bias is None

    def test_untied_folder_without_lm_head_is_refused(self, tmp_path):
        from safetensors.numpy import save_file

        (tmp_path / "config.json").write_text(json.dumps({"tie_word_embeddings": False}))
        save_file({"model.embed_tokens.weight": np.ones((3, 2), np.float32)}, tmp_path / "model.safetensors")
        with pytest.raises(InputError, match="no LM head"):
            loading.load_head(tmp_path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "absent.npy", "does not exist"),
        (lambda p: (p / "head.txt").write_text("1 2") and p / "head.txt", "is not .npy, .npz"),
        (lambda p: (p / "bad.gguf").write_bytes(b"GGUF\x03\x00garbage") and p / "bad.gguf", "could not read"),
        (lambda p: (p / "bad.npy").write_bytes(b"not numpy") and p / "bad.npy", "could not read"),
        (lambda p: p, "no config.json"),
    ],
)
def test_unusable_heads_get_a_clear_error(tmp_path, make, message):
    if "gguf" in message or str(make(tmp_path)).endswith(".gguf"):
        pytest.importorskip("gguf")
    with pytest.raises(InputError, match=message):
        loading.load_head(make(tmp_path))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "no-such-model", "does not exist"),
        (lambda p: p, "no config.json"),
        (lambda p: (p / "weights.bin").write_bytes(b"x") and p / "weights.bin", "not a .gguf file"),
    ],
)
def test_unusable_models_get_a_clear_error(tmp_path, make, message):
    with pytest.raises(InputError, match=message):
        loading.resolve(make(tmp_path))


def test_a_corrupted_gguf_model_gets_a_clear_error(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(InputError, match="could not load"):
        loading.load_causal_lm(tmp_path / "broken.gguf")


def test_cli_argmax_reports_a_missing_head(tmp_path, capsys):
    assert main(["argmax", "--head", str(tmp_path / "absent.npz")]) == 2
    assert "--head:" in capsys.readouterr().err


@needs_smollm2
class TestSmolLM2Head:
    @pytest.mark.parametrize(
        ("constant", "value", "message"),
        [("SMOLLM2_SHA256", "0" * 64, "has sha256"), ("SMOLLM2_BYTES", 1, "corrupted download")],
    )
    def test_a_file_that_fails_its_check_is_refused(self, monkeypatch, constant, value, message):
        monkeypatch.setattr(loading, constant, value)
        with pytest.raises(InputError, match=message):
            loading.load_head("smollm2")

    def test_head_shape_and_hash(self):
        W, bias, name = loading.load_head("smollm2")
        assert W.shape == (49152, 576) and bias is None and "SmolLM2" in name

    def test_unargmaxable_tokens_are_exactly_the_duplicated_rows(self):
        """On a sample of tokens, the pipeline's 'never wins' answers coincide with rows that have an
        exact twin elsewhere in the head (found here independently, by hashing rows)."""
        W, _, _ = loading.load_head("smollm2")
        twins: dict[bytes, list[int]] = {}
        for i, row in enumerate(W):
            twins.setdefault(row.tobytes(), []).append(i)
        duplicated = sorted(i for group in twins.values() if len(group) > 1 for i in group)
        sample = np.unique(np.r_[np.arange(64), duplicated, np.arange(0, len(W), 4099)])
        result = ex.argmaxable(W, tokens=sample)
        never = np.flatnonzero(~result["argmaxable"][sample])
        assert sample[never].tolist() == duplicated
        assert set(result["method"][sample]) <= {
            "duplicate row",
            "certificate whitened",
            "reflections",
            "LP, re-checked",
            *(f"certificate h = {s:g} w_i" for s in ex.CHEAP_SCALES),
        }

    @pytest.mark.slow
    def test_rankwall_argmax_on_the_whole_head(self, capsys):
        assert main(["argmax", "--json"]) == 0
        record = json.loads(capsys.readouterr().out)
        assert record["V"] == 49152 and sum(record["methods"].values()) == 49152


class TestSpotOutputFolder:
    """Issue 19: a failed ``spot`` leaves no folder that it created behind."""

    def test_a_failed_spot_removes_the_folder_it_created(self, tmp_path, capsys):
        out = tmp_path / "a" / "spot-out"
        assert main(["spot", str(tmp_path / "no-model"), "--tokens", "16", "--out", str(out)]) == 2
        assert "model:" in capsys.readouterr().err
        assert not (tmp_path / "a").exists()

    def test_a_folder_that_existed_stays(self, tmp_path, capsys):
        assert main(["spot", str(tmp_path / "no-model"), "--tokens", "16", "--out", str(tmp_path)]) == 2
        assert tmp_path.is_dir()

    def test_a_created_folder_that_is_no_longer_empty_stays(self, tmp_path):
        from rankwall.checks.models import spot

        out = tmp_path / "new" / "deeper"
        with pytest.raises(RuntimeError), spot.output_folder(out) as folder:
            (folder / "keep.txt").write_text("a user's file")
            raise RuntimeError("the run failed")
        assert (out / "keep.txt").read_text() == "a user's file"

    def test_a_successful_block_keeps_its_folder(self, tmp_path):
        from rankwall.checks.models import spot

        with spot.output_folder(tmp_path / "made") as folder:
            pass
        assert folder.is_dir() and folder == tmp_path / "made"
