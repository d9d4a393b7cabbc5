"""Tool names and glob patterns, matched and ranked exactly as the TS SDK's tool-name-pattern."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def matches_tool_pattern(pattern: str, name: str) -> bool:
    """matches_tool_pattern says whether a tool name matches a pattern.

    `*` matches any run of characters (none included), `?` exactly one, every other character
    itself (case-sensitive, no escapes); a pattern without `*` or `?` is an exact name.
    Characters are code points, as in the TS SDK.
    """
    pi = ni = 0
    star, star_name = -1, 0
    while ni < len(name):
        if pi < len(pattern) and (pattern[pi] == "?" or (pattern[pi] != "*" and pattern[pi] == name[ni])):
            pi += 1
            ni += 1
        elif pi < len(pattern) and pattern[pi] == "*":
            star, star_name = pi, ni
            pi += 1
        elif star >= 0:
            # The last `*` takes one more character and matching resumes after it.
            star_name += 1
            pi, ni = star + 1, star_name
        else:
            return False
    while pi < len(pattern) and pattern[pi] == "*":
        pi += 1
    return pi == len(pattern)


def pick_tool_pattern(patterns: Iterable[str], name: str) -> str | None:
    """pick_tool_pattern returns the pattern that decides for `name`, or None when none matches.

    The exact name first, then the matching pattern with the most literal characters (neither
    `*` nor `?`), then the one that sorts first (by code point), so the choice never depends on
    the order the patterns were written in.
    """
    best: tuple[int, str] | None = None
    for pattern in patterns:
        if pattern == name:
            return pattern
        if not matches_tool_pattern(pattern, name):
            continue
        literals = sum(1 for c in pattern if c not in "*?")
        if best is None or literals > best[0] or (literals == best[0] and pattern < best[1]):
            best = (literals, pattern)
    return None if best is None else best[1]


def validate_tool_pattern(pattern: object) -> None:
    """validate_tool_pattern raises ValueError for a pattern that is not a non-empty string."""
    if not isinstance(pattern, str) or pattern == "":
        raise ValueError("elision policy: a tool name pattern must be a non-empty string")


class ToolFilter:
    """ToolFilter says which tools an elision policy touches at all."""

    def __init__(self, include: Sequence[str] | None, exclude: Sequence[str] | None) -> None:
        """Validates the patterns: ValueError for an empty one or an empty include list."""
        if include is not None and len(include) == 0:
            raise ValueError("elision policy: include must name at least one tool (omit it to include every tool)")
        for pattern in [*(include or []), *(exclude or [])]:
            validate_tool_pattern(pattern)
        self._include = None if include is None else list(include)
        self._exclude = list(exclude or [])

    def applies(self, tool_name: str | None) -> bool:
        """False for a tool no include pattern matches (when include is given) or an exclude
        pattern matches: exclusion wins. A result without a tool name is matched as ""."""
        name = tool_name or ""
        if any(matches_tool_pattern(p, name) for p in self._exclude):
            return False
        return self._include is None or any(matches_tool_pattern(p, name) for p in self._include)
