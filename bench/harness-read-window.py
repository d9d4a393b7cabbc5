"""Times pydantic-ai-harness's own read_tool_result on a LocalFileStore, for the benchmark.

Usage: harness-read-window.py ROOT KEY OFFSET LIMIT

ROOT is a LocalFileStore base_dir that holds the payload at KEY. Prints one JSON object:
{"seconds": <one read>, "header": "<first line of the window>", "lines": <lines shown>,
"first": "<its first line>"}. One read a process: the bench interleaves them with its own.
`read_tool_result` delegates to `_read_slice(store.read, handle, offset, limit, from_end,
pattern)`; calling it directly measures exactly what the tool does, without an agent run.
"""

import asyncio
import json
import sys
import time
from pathlib import Path

from pydantic_ai_harness.tool_output_limits._capability import _read_slice
from pydantic_ai_harness.tool_output_limits._store import LocalFileStore


async def main() -> None:
    root, key, offset, limit = sys.argv[1:5]
    store = LocalFileStore(base_dir=Path(root))
    started = time.perf_counter()
    text = await _read_slice(store.read, key, int(offset), int(limit), False, None)
    seconds = time.perf_counter() - started
    lines = text.split("\n")
    print(json.dumps({"seconds": seconds, "header": lines[0], "lines": len(lines) - 1, "first": lines[1] if len(lines) > 1 else ""}))


asyncio.run(main())
