"""Terminal escape sequences removed from the text an SDK shows a model.

The same rules as the server's windows and previews and the TS SDK's `stripAnsi`
(docs/design/ansi-strip.md), pinned by the vectors in conformance/ansi-strip-vectors.json:

- CSI: ``ESC [`` or U+009B, then any characters 0x20-0x3F, then a final 0x40-0x7E.
- Strings: OSC (``ESC ]``, U+009D), DCS (``ESC P``, U+0090), SOS (``ESC X``, U+0098), PM
  (``ESC ^``, U+009E) and APC (``ESC _``, U+009F), up to and including BEL, ST (``ESC \\``)
  or U+009C.
- Other ESC sequences: ESC, any intermediates 0x20-0x2F, then a final 0x30-0x7E; a lone
  U+009C too.
- A sequence cut short ends right before what cut it, which stays text: a character outside
  its grammar (CSI, other ESC sequences), a line feed or an ESC that does not start ST
  (strings), the end of the text, or its 4096th code point. A lone ESC is a sequence of one.
- Other control characters are kept.
"""

from __future__ import annotations

import re

MAX_SEQUENCE_CHARS = 4096
"""The longest sequence in code points; a longer one is cut there."""

_ESC = "\x1b"
_MAY_START = re.compile("[\x1b\x90\x98\x9b-\x9f]")
_STRING_INTRODUCERS = frozenset("]PX^_")
_C1_STRING_INTRODUCERS = frozenset("\x9d\x90\x98\x9e\x9f")


def _csi_end(text: str, start: int, p: int) -> int:
    n = len(text)
    for k in range(p, n):
        if k - start + 1 > MAX_SEQUENCE_CHARS:
            return k
        x = ord(text[k])
        if 0x20 <= x <= 0x3F:
            continue
        if 0x40 <= x <= 0x7E:
            return k + 1
        return k
    return n


def _string_end(text: str, start: int, p: int) -> int:
    n = len(text)
    for k in range(p, n):
        chars = k - start + 1
        if chars > MAX_SEQUENCE_CHARS:
            return k
        c = text[k]
        if c == "\x07":
            return k + 1
        if c == "\n":
            return k
        if c == _ESC:
            if k + 1 >= n:
                return n
            return k + 2 if text[k + 1] == "\\" and chars < MAX_SEQUENCE_CHARS else k
        if c == "\x9c":
            return k + 1
    return n


def sequence_end(text: str, i: int) -> int | None:
    """sequence_end returns the index right after the sequence starting at `i`, or None."""
    n = len(text)
    c = text[i]
    if c == _ESC:
        if i + 1 >= n:
            return n
        nxt = text[i + 1]
        x = ord(nxt)
        if nxt == "[":
            return _csi_end(text, i, i + 2)
        if nxt in _STRING_INTRODUCERS:
            return _string_end(text, i, i + 2)
        if 0x20 <= x <= 0x2F:
            for k in range(i + 2, n):
                if k - i + 1 > MAX_SEQUENCE_CHARS:
                    return k
                y = ord(text[k])
                if 0x20 <= y <= 0x2F:
                    continue
                return k + 1 if 0x30 <= y <= 0x7E else k
            return n
        if 0x30 <= x <= 0x7E:
            return i + 2
        return i + 1
    if c == "\x9b":
        return _csi_end(text, i, i + 1)
    if c in _C1_STRING_INTRODUCERS:
        return _string_end(text, i, i + 1)
    if c == "\x9c":
        return i + 1
    return None


def has_ansi(text: str) -> bool:
    """has_ansi is True when `text` may hold a sequence (an ESC or a C1 introducer)."""
    return _MAY_START.search(text) is not None


def strip_ansi(text: str) -> str:
    """strip_ansi returns `text` without its terminal escape sequences; other text is returned as is."""
    m = _MAY_START.search(text)
    if m is None:
        return text
    parts: list[str] = []
    kept = 0
    i = m.start()
    while m is not None:
        i = m.start()
        end = sequence_end(text, i)
        if end is None:
            m = _MAY_START.search(text, i + 1)
            continue
        parts.append(text[kept:i])
        kept = end
        m = _MAY_START.search(text, end)
    parts.append(text[kept:])
    return "".join(parts)


def model_text(text: str, keep_ansi: bool = False) -> str:
    """model_text is a tool result's text as the SDK shows it to a model: `strip_ansi` unless `keep_ansi`."""
    return text if keep_ansi else strip_ansi(text)
