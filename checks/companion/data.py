"""The project's data: real text shipped inside the package, verified by hash on load.

The corpora live xz-compressed in ``checks/companion/corpora/`` (source and licence in its
``NOTICE.md``) and are checked against the sha256 below on every load; nothing is downloaded.
A user's own text comes in through ``--text`` (the ``spot`` command) or, for every command
that reads a corpus, through ``$RANKWALL_DATA``: a folder holding the user's own files under
the same names (``tinyshakespeare.txt``, ...). Those are the user's texts, so they are read
as they are, without a hash to match.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from rankwall.theory.validation import InputError

#: sha256 of each corpus text (uncompressed), as listed in ``checks/companion/corpora/NOTICE.md``.
CORPORA = {
    "tinyshakespeare.txt": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "wikitext-2.valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    "wikitext-2.test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
}
DATA_VARIABLE = "RANKWALL_DATA"


def read_corpus(name: str) -> str:
    """The text of a corpus: ``$RANKWALL_DATA/name`` if that variable is set (the user's own
    text), else the shipped copy after checking its sha256 against :data:`CORPORA`."""
    if name not in CORPORA:
        raise InputError(f"corpus: unknown corpus {name!r} (known: {', '.join(CORPORA)})")
    if DATA_VARIABLE in os.environ:
        path = Path(os.environ[DATA_VARIABLE]) / name
        if not path.is_file():
            raise InputError(f"{DATA_VARIABLE}: {path} is missing (unset {DATA_VARIABLE} to use the shipped copy)")
        return read_text_file(path, DATA_VARIABLE)
    shipped = resources.files("rankwall.checks.companion") / "corpora" / f"{name}.xz"
    try:
        raw = lzma.decompress(shipped.read_bytes())
    except (FileNotFoundError, lzma.LZMAError) as error:
        raise InputError(f"corpus: the shipped {name}.xz is missing or damaged ({error}); reinstall rankwall") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CORPORA[name]:
        raise InputError(f"corpus: the shipped {name}.xz has sha256 {digest[:16]}..., expected {CORPORA[name][:16]}...")
    return raw.decode("utf-8")


def read_text_file(path: str | Path, argument: str = "--text") -> str:
    """A user's UTF-8 text file, with an error naming ``argument`` when it cannot be read or is empty."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{argument}: {path} does not exist")
    if not path.is_file():
        raise InputError(f"{argument}: {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{argument}: {path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise InputError(f"{argument}: {path} cannot be read ({error.strerror})") from None
    if not text:
        raise InputError(f"{argument}: {path} is empty (0 characters)")
    return text


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
