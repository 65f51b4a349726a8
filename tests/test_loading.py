"""Loading models as users have them (checks.models.loading): no third-party progress bars while
a model loads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from checks.models import loading

needs_transformers = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "tokenizers", "safetensors")),
    reason="needs torch, transformers, tokenizers and safetensors",
)


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
