"""The project's data: real text from ``../shared/data/`` (never downloaded), verified by hash.

The folder is found from ``$RANKWALL_DATA`` or as ``shared/data`` beside the checkout.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from theory._validation import InputError

#: sha256 of each corpus file, from ../shared/data/README.md.
CORPORA = {
    "tinyshakespeare.txt": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "wikitext-2.valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    "wikitext-2.test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
}


def data_folder() -> Path:
    """``$RANKWALL_DATA``, else the ``shared/data`` folder beside this checkout."""
    if "RANKWALL_DATA" in os.environ:
        return Path(os.environ["RANKWALL_DATA"])
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def corpus_path(name: str) -> Path:
    """The path of a corpus file, after checking its sha256 against :data:`CORPORA`."""
    read_corpus(name)
    return data_folder() / name


def read_corpus(name: str) -> str:
    """The text of a corpus file, after checking its sha256 against :data:`CORPORA`."""
    if name not in CORPORA:
        raise InputError(f"corpus: unknown corpus {name!r} (known: {', '.join(CORPORA)})")
    path = data_folder() / name
    if not path.is_file():
        raise InputError(f"corpus: {path} is missing (set RANKWALL_DATA to the folder that holds {name})")
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CORPORA[name]:
        raise InputError(f"corpus: {path} has sha256 {digest[:16]}..., expected {CORPORA[name][:16]}...")
    return raw.decode("utf-8")


@dataclass(frozen=True)
class TokenStream:
    """Token ids and the vocabulary they index (id ``V - 1`` is ``<unk>`` for word streams)."""

    ids: np.ndarray
    vocabulary: list[str]

    @property
    def V(self) -> int:
        return len(self.vocabulary)


def characters(text: str) -> TokenStream:
    """A character-level stream: one id per distinct character."""
    vocabulary = sorted(set(text))
    index = {c: i for i, c in enumerate(vocabulary)}
    return TokenStream(np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text)), vocabulary)


def words(text: str, keep: int = 2047) -> TokenStream:
    """A word-level stream over the ``keep`` most frequent words, the rest mapped to ``<unk>``."""
    tokens = re.findall(r"[A-Za-z']+|[^\sA-Za-z']", text)
    distinct, counts = np.unique(tokens, return_counts=True)
    kept = [str(w) for w in distinct[np.argsort(-counts, kind="stable")][:keep]]
    index = {w: i for i, w in enumerate(kept)}
    unknown = len(kept)
    ids = np.fromiter((index.get(t, unknown) for t in tokens), dtype=np.int64, count=len(tokens))
    return TokenStream(ids, [*kept, "<unk>"])
