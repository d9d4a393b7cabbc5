"""Local head/tail cuts of a text, character for character the TS SDK's `truncateText`."""

from __future__ import annotations

import math
from typing import Literal

TruncateMode = Literal["head", "tail", "head+tail"]
"""Which part of a text a truncation keeps."""


def truncate_text(text: str, mode: TruncateMode, budget: float) -> str:
    """truncate_text keeps at most `budget` characters of `text` and marks what it left out.

    Characters are code points, as in every Spillway SDK. `head` keeps the start, `tail` the end,
    `head+tail` both halves (the head gets the odd one), with a marker line
    `[… N of T chars omitted …]` where characters were left out; the marker is not counted. A
    text within budget is returned unchanged.
    """
    total = len(text)
    keep = max(0, math.floor(budget))
    if total <= keep:
        return text
    marker = f"[… {total - keep} of {total} chars omitted …]"
    if mode == "head":
        return f"{text[:keep]}\n{marker}"
    if mode == "tail":
        return f"{marker}\n{text[total - keep :]}"
    head = math.ceil(keep / 2)
    tail = keep - head
    return f"{text[:head]}\n{marker}\n{text[total - tail :]}"
