"""The elision policy: per tool result, what the model sees. The TS SDK's createElisionPolicy.

Bands by size pass a result through, cut it locally, spill it to Spillway (the model sees the
server's preview naming the handle), or spill it and show a summary (`Summarize`). `per_tool`
overrides bands and the truncation budget by tool name or glob pattern; `include` and `exclude`
scope the policy. Both SDKs render the vectors of conformance/elision-vectors.json identically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc

from spillway_client._gen.spillway.v1 import types_pb2 as types_pb
from spillway_client._messages import json_text
from spillway_client.attempts import AttemptTracker, offload_next_attempt
from spillway_client.client import AsyncSpillwayClient
from spillway_client.errors import StatusError
from spillway_client.model_text import model_text
from spillway_client.read_tool_output import READ_TOOL_OUTPUT_NAME
from spillway_client.summarize_action import Summarize, SummaryFailure, run_summarizer, summarized_text
from spillway_client.tool_name_pattern import ToolFilter, pick_tool_pattern, validate_tool_pattern
from spillway_client.truncate_text import TruncateMode, truncate_text


@dataclass(frozen=True)
class Truncate:
    """Cut the result locally, keeping the head, the tail or both within the truncation budget."""

    mode: TruncateMode = "head+tail"


Action = Literal["passthrough", "spill"] | Truncate | Summarize
"""What a band does with a tool result: keep it, cut it, spill it, or spill it and summarize it."""


@dataclass(frozen=True)
class Band:
    """Band applies `action` to results whose measured size is at most `up_to` (None: any size)."""

    action: Action
    up_to: int | None = None
    """Inclusive upper bound in the policy's measure; None on the last, catch-all band."""


@dataclass(frozen=True)
class ToolOverride:
    """ToolOverride replaces the policy's bands and/or truncation budget for some tools."""

    bands: Sequence[Band] | None = None
    truncate_budget: int | None = None


@dataclass(frozen=True)
class ElisionResult:
    """ElisionResult is what goes into the model's context in place of a tool result.

    `kind`: `passthrough` (text is the content), `truncated` (a local cut with a marker),
    `spilled` (the server's preview naming the handle), `summarized` (a line naming the handle,
    then the summary), `preview_only` (Spillway was unavailable: a local cut, no handle).
    """

    kind: Literal["passthrough", "truncated", "spilled", "summarized", "preview_only"]
    text: str
    """The text to give the model."""
    size: int
    """The content's size in the policy's measure."""
    attachment: types_pb.ResultAttachment | None = None
    """The committed record, for `spilled` and `summarized`."""
    summary_failure: SummaryFailure | None = None
    """Why a summarize band showed the spilled view (kind `spilled`) instead of a summary."""


@dataclass
class ElisionPolicy:
    """ElisionPolicy decides, per tool result, what the model sees.

    Construction validates (ValueError for no bands, bands out of order, a last band with an
    `up_to`, an unknown action, a negative budget, an empty tool pattern or include list).
    """

    bands: Sequence[Band]
    """Bands in ascending `up_to` order; the last one has none."""
    measure: Literal["chars", "tokens"] = "chars"
    """Unit of `up_to` and `truncate_budget`: characters (code points) or tokens, ceil(chars / 4)."""
    fallback: TruncateMode = "head+tail"
    """What a spill shows when Spillway is unavailable (after the client's retries)."""
    preservation: Literal["best_effort", "required"] = "best_effort"
    """`required` fails such a spill instead: UNAVAILABLE, message starting `blob_store_required`."""
    truncate_budget: int = 2000
    """Characters (or tokens) a truncation keeps, marker excluded."""
    per_tool: Mapping[str, ToolOverride] = field(default_factory=dict)
    """Overrides keyed by tool name or glob (`*` any run, `?` one character): the exact name wins,
    then the matching pattern with the most literal characters, then the one sorting first."""
    include: Sequence[str] | None = None
    """Only tools matching one of these names or patterns are elided; None: every tool."""
    exclude: Sequence[str] | None = None
    """Tools matching one of these pass through untouched; wins over include."""
    keep_ansi: bool = False
    """Keep terminal escape sequences in the text the policy shows (passthrough, truncated,
    preview_only) and in spilled previews. By default they are removed from what the model sees
    and the result is measured without them (`model_text`); a spill stores the result as given."""
    _attempts: AttemptTracker = field(default_factory=AttemptTracker, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _validate_bands(self.bands)
        _validate_budget(self.truncate_budget)
        for pattern, override in self.per_tool.items():
            validate_tool_pattern(pattern)
            if not isinstance(override, ToolOverride):
                # Every bad option is a ValueError naming the policy, as the tests and docs say.
                raise ValueError(f"elision policy: per_tool[{pattern!r}] must be a ToolOverride")  # noqa: TRY004
            if override.bands is not None:
                _validate_bands(override.bands)
            if override.truncate_budget is not None:
                _validate_budget(override.truncate_budget)
        self._filter = ToolFilter(self.include, self.exclude)

    def _size(self, text: str) -> int:
        return math.ceil(len(text) / 4) if self.measure == "tokens" else len(text)

    def _chars(self, units: int) -> int:
        return units * 4 if self.measure == "tokens" else units

    async def apply(
        self,
        client: AsyncSpillwayClient,
        key: Mapping[str, Any],
        content: Any,
        *,
        tool_name: str | None = None,
        offload: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> ElisionResult:
        """apply measures `content`, picks the first band it fits and applies its action.

        `content` is text (a `str`) or a JSON value (measured and shown as compact JSON, spilled
        as `application/json`); `key` is `{tenant, run_id, call_id}`, where a spill goes;
        `offload` are extra header options and `timeout` the spill's deadline. Results of
        `read_tool_output` always pass through. Raises only for a spill Spillway refused (for
        example ALREADY_EXISTS), or that was UNAVAILABLE under `required` preservation.
        """
        is_text = isinstance(content, str)
        raw = content if is_text else json_text(content)
        # read_tool_output's text is the server's window, already rendered as the model sees it.
        if tool_name == READ_TOOL_OUTPUT_NAME:
            return ElisionResult("passthrough", raw, self._size(raw))
        text = model_text(raw, self.keep_ansi)
        size = self._size(text)
        if not self._filter.applies(tool_name):
            return ElisionResult("passthrough", text, size)
        pattern = pick_tool_pattern(self.per_tool.keys(), tool_name or "")
        override = None if pattern is None else self.per_tool[pattern]
        bands = override.bands if override is not None and override.bands is not None else self.bands
        budget = override.truncate_budget if override is not None and override.truncate_budget is not None else None
        budget_chars = self._chars(self.truncate_budget if budget is None else budget)
        band = next((b for b in bands if b.up_to is None or size <= b.up_to), None)
        action: Action = "spill" if band is None else band.action
        if action == "passthrough":
            return ElisionResult("passthrough", text, size)
        if isinstance(action, Truncate):
            return ElisionResult("truncated", truncate_text(text, action.mode, budget_chars), size)
        options = {**({"preview": {"keep_ansi": True}} if self.keep_ansi else {}), **dict(offload or {})}
        try:
            # Without an attempt in the key, a call id spilled before with other bytes becomes the
            # call's next attempt (offload_next_attempt), as in the TypeScript policy.
            if key.get("attempt"):
                attachment = await client.offload(key, content, timeout=timeout, **options)
            else:
                attachment = await offload_next_attempt(
                    client, key, content, self._attempts, timeout=timeout, **options
                )
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            if self.preservation == "required":
                raise StatusError(
                    grpc.StatusCode.UNAVAILABLE,
                    f'blob_store_required: the result of call "{key["call_id"]}" must be stored, '
                    f"but Spillway is unavailable: {err.details()}",
                ) from err
            cut = truncate_text(text, self.fallback, budget_chars)
            note = "[full output not stored: the output store is unavailable; no handle to read]"
            return ElisionResult("preview_only", f"{cut}\n{note}", size)
        spilled = ElisionResult("spilled", attachment.preview.text, size, attachment)
        if not isinstance(action, Summarize):
            return spilled
        # The output is stored before the summarizer runs, so whatever it does nothing is lost.
        outcome = await run_summarizer(action, tool_name or "", text)
        if isinstance(outcome, SummaryFailure):
            return ElisionResult("spilled", spilled.text, size, attachment, outcome)
        return ElisionResult("summarized", summarized_text(attachment, tool_name, outcome), size, attachment)


def _validate_bands(bands: Sequence[Band]) -> None:
    if len(bands) == 0:
        raise ValueError("elision policy: bands must not be empty")
    if bands[-1].up_to is not None:
        raise ValueError("elision policy: the last band must have no up_to (it catches every larger result)")
    previous = -1
    for band in bands[:-1]:
        if band.up_to is None or not band.up_to > previous:
            raise ValueError("elision policy: every band but the last needs an up_to larger than the one before")
        previous = band.up_to
    for band in bands:
        if not (band.action in ("passthrough", "spill") or isinstance(band.action, Truncate | Summarize)):
            raise ValueError(f"elision policy: unknown action {band.action!r}")


def _validate_budget(budget: object) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget >= 0:
        raise ValueError("elision policy: truncate_budget must be a non-negative number")
