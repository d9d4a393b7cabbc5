"""Starts one real Spillway server (memory backend) for the test session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import pytest

from spillway_client import AsyncSpillwayClient, SpillwayClient

REPO = Path(__file__).resolve().parents[3]
CLI = REPO / "server" / "dist" / "entry.cjs"
"""The `spillway` executable (the package's bin)."""
START_SECONDS = 30
SMALL_BYTES_WINDOW = 256 * 1024
"""max_bytes_window of the small_window_url server."""


def _build_if_stale() -> None:
    """Build every TypeScript package (`tsc -b` rebuilds only what changed since the last build)."""
    subprocess.run(["npx", "tsc", "-b", "tsconfig.build.json"], cwd=REPO, check=True)


@contextlib.contextmanager
def spillway_server(*flags: str, backend: str = "memory", env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Runs `spillway serve --backend <backend>` with extra flags (and environment) on a free port; yields its URL."""
    with spillway_process(*flags, backend=backend, env=env) as (url, _):
        yield url


@contextlib.contextmanager
def spillway_process(
    *flags: str, backend: str = "memory", port: int = 0, env: Mapping[str, str] | None = None, build: bool = True
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """spillway_server that also yields the process (to kill it) and takes a fixed port (0: a free one);
    `build=False` starts the server as last built, without checking the build first."""
    if build:
        _build_if_stale()
    proc = subprocess.Popen(
        ["node", str(CLI), "serve", "--backend", backend, "--port", str(port), "--grace-ms", "1000", *flags],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "SPILLWAY_LOG_LEVEL": "info", **(env or {})},
    )
    found: dict[str, str] = {}
    ready = threading.Event()

    def pump() -> None:
        # Keeps draining the log so the server never blocks on a full pipe.
        assert proc.stdout is not None
        for line in proc.stdout:
            if not ready.is_set():
                try:
                    entry = json.loads(line)
                    # The metrics endpoint (--metrics-port) logs its own URL, which is not the service's.
                    url = None if entry.get("msg") == "metrics served" else entry.get("url")
                except (ValueError, AttributeError):
                    url = None
                if isinstance(url, str):
                    found["url"] = url
                    ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(START_SECONDS) or "url" not in found:
        proc.kill()
        raise RuntimeError("spillway serve did not log its URL")
    try:
        yield found["url"], proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The URL of a `spillway serve --backend memory` started for the session, on a free port."""
    with spillway_server() as url:
        yield url


@pytest.fixture(scope="module")
def small_window_url() -> Iterator[str]:
    """The URL of a memory-backend server whose bytes windows end at 256 KiB."""
    with spillway_server("--max-bytes-window", str(SMALL_BYTES_WINDOW)) as url:
        yield url


@pytest.fixture
def filesystem_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The URL and data directory of a filesystem-backend server of the test's own."""
    store = tmp_path / "store"
    with spillway_server("--data-dir", str(store), backend="filesystem") as url:
        yield url, store


@pytest.fixture(scope="session")
def client(server_url: str) -> Iterator[SpillwayClient]:
    """A blocking client of the session's server."""
    with SpillwayClient(server_url) as c:
        yield c


@pytest.fixture
async def aclient(server_url: str) -> AsyncIterator[AsyncSpillwayClient]:
    """An async client of the session's server, on the test's event loop."""
    async with AsyncSpillwayClient(server_url) as c:
        yield c


@pytest.fixture
def client_one(server_url: str) -> Iterator[SpillwayClient]:
    """A blocking client holding one connection: every call goes through its `raw` stub, which a test may wrap."""
    with SpillwayClient(server_url, connections=1) as c:
        yield c


@pytest.fixture
async def aclient_one(server_url: str) -> AsyncIterator[AsyncSpillwayClient]:
    """An async client holding one connection: every call goes through its `raw` stub, which a test may wrap."""
    async with AsyncSpillwayClient(server_url, connections=1) as c:
        yield c


@pytest.fixture
def run_id() -> str:
    """A run id no other test uses."""
    return f"run-{uuid.uuid4().hex[:12]}"
