"""The summarize action of an elision policy: spill, then show a summary with the handle.

Behaves as the TS SDK's summarize-action: the same checks, the same fallbacks, the same text.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from spillway_client._gen.spillway.v1 import types_pb2 as types_pb

Summarizer = Callable[[str, str], "str | Awaitable[str]"]
"""`(tool_name, full_text) -> summary`, sync or async: pydantic-ai-harness's `SummarizeFunc` shape."""

SummaryFailureReason = Literal["threw", "timeout", "too_long", "empty", "not_text"]
"""Why a summary was not shown."""

DEFAULT_MAX_CHARS = 4000
"""Longest summary shown unless told otherwise, in characters (code points)."""
DEFAULT_TIMEOUT = 60.0
"""Seconds a summarizer may take unless told otherwise."""


@dataclass(frozen=True)
class Summarize:
    """Summarize spills the full output and shows the model a summary with the handle.

    Nothing is lost: the output is stored before the summarizer runs. A summarizer that raises,
    runs past `timeout`, or returns anything but a non-blank `str` of at most `max_chars`
    characters is ignored: the model sees the plain spilled view and the result says why
    (`summary_failure`). An async summarizer is awaited (and cancelled at its timeout); a sync
    one runs in a worker thread, so its timeout holds even when it blocks. Construction raises
    TypeError for a `summarize` that is not callable, ValueError for a bad `max_chars` or `timeout`.
    """

    summarize: Summarizer
    """Produces the summary from the tool name and the full text (your model call)."""
    max_chars: int = DEFAULT_MAX_CHARS
    """Longest summary shown, in characters."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds the summarizer may take."""

    def __post_init__(self) -> None:
        if not callable(self.summarize):
            raise TypeError("elision policy: summarize must be callable")
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars <= 0:
            raise ValueError("elision policy: summarize max_chars must be a positive integer")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) or not self.timeout > 0:
            raise ValueError("elision policy: summarize timeout must be a positive number of seconds")


@dataclass(frozen=True)
class SummaryFailure:
    """SummaryFailure says why the model was shown the spilled view instead of a summary."""

    reason: SummaryFailureReason
    """`threw`, `timeout`, `too_long` (over max_chars), `empty` (only whitespace), `not_text`."""
    message: str
    """A one-line account, for logs."""


async def run_summarizer(action: Summarize, tool_name: str, text: str) -> str | SummaryFailure:
    """run_summarizer calls the summarizer once, bounded by its timeout, and returns the summary
    or why there is none. It raises nothing but the caller's own cancellation."""
    try:
        summary: Any = await asyncio.wait_for(_call(action.summarize, tool_name, text), action.timeout)
    except asyncio.TimeoutError:
        return SummaryFailure("timeout", f"no summary within {round(action.timeout * 1000)} ms")
    except Exception as err:  # noqa: BLE001 - whatever the summarizer raises, the spilled view stands
        return SummaryFailure("threw", f"the summarizer threw: {_describe(err)}")
    if not isinstance(summary, str):
        return SummaryFailure("not_text", f"the summarizer returned {type(summary).__name__}, not a str")
    if summary.strip(" \t\r\n") == "":
        return SummaryFailure("empty", "the summarizer returned no text")
    if len(summary) > action.max_chars:
        return SummaryFailure(
            "too_long", f"the summary has {len(summary)} chars, over the {action.max_chars}-char limit"
        )
    return summary


def summarized_text(attachment: types_pb.ResultAttachment, tool_name: str | None, summary: str) -> str:
    """summarized_text is what the model sees for a summarized output: a header in the form of the
    server's preview (handle, stored size, whose output), the summary, and how to read the
    stored output, which is whole."""
    of = "the output" if not tool_name else f'the "{tool_name}" output'
    h = attachment.handle
    lines = "1 line" if attachment.line_count == 1 else f"{attachment.line_count} lines"
    return (
        f"[{h}] {attachment.size_bytes} bytes · {lines} · summary of {of}\n{summary}\n"
        f'[full output stored: read_tool_output(handle="{h}", offset=0)]'
    )


async def _call(fn: Summarizer, tool_name: str, text: str) -> Any:
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        return await fn(tool_name, text)  # type: ignore[misc]
    outcome = await asyncio.to_thread(fn, tool_name, text)
    return await outcome if inspect.isawaitable(outcome) else outcome


def _describe(err: BaseException) -> str:
    line = str(err).split("\n", 1)[0]
    return f"{line[:200]}…" if len(line) > 200 else line
