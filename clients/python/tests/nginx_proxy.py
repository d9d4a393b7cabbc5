"""A real nginx in front of Spillway replicas, running the config docs/operations.md documents."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

START_SECONDS = 15


def documented_config() -> str:
    """The `http`-level nginx config of docs/operations.md (test/load-balancer.test.ts checks it
    is the one the TypeScript tests run), for replicas on 10.0.0.11-13:50051."""
    docs = (REPO / "docs" / "operations.md").read_text()
    match = re.search(r"```nginx\n(upstream spillway \{.*?)```", docs, re.DOTALL)
    if match is None:
        raise RuntimeError("docs/operations.md has no nginx config block")
    return match.group(1)


def proxy_config(upstreams: list[str], listen: str) -> str:
    """documented_config with its replicas and listen address replaced."""
    lines = documented_config().splitlines(keepends=True)
    servers = [i for i, line in enumerate(lines) if line.strip().startswith("server 10.0.0.")]
    template = lines[servers[0]]
    replaced = [template.replace("10.0.0.11:50051", u) for u in upstreams]
    lines[servers[0] : servers[-1] + 1] = replaced
    return "".join(lines).replace("listen 0.0.0.0:50051 http2;", f"listen {listen} http2;")


def free_port() -> int:
    """free_port returns a TCP port on 127.0.0.1 that is free now, drawn below Linux's ephemeral
    range (32768+) as test/support/free-port.ts does, so no outgoing connection can take it
    while a replica restarts on it."""
    for _ in range(50):
        port = random.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def nginx(upstreams: list[str]) -> Iterator[str]:
    """Runs the system nginx (`bash scripts/install-nginx.sh` installs it) in the foreground on a
    free loopback port, proxying gRPC to `upstreams` (`host:port`); yields its `http://` URL."""
    binary = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if binary is None:
        raise RuntimeError("nginx is not installed: run bash scripts/install-nginx.sh")
    port = free_port()
    directory = Path(tempfile.mkdtemp(prefix="spillway-nginx-"))
    # Run as root, nginx's workers drop to "nobody" and must reach the temp paths.
    directory.chmod(0o755)
    temp_paths = "".join(
        f"    {kind}_temp_path {directory / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    proxied = "".join(
        f"    {line}" if line.strip() else line
        for line in proxy_config(upstreams, f"127.0.0.1:{port}").splitlines(True)
    )
    config = (
        f"worker_processes 1;\npid {directory / 'nginx.pid'};\nerror_log {directory / 'error.log'} warn;\n\n"
        "events {\n    worker_connections 1024;\n}\n\n"
        f"http {{\n    access_log {directory / 'access.log'};\n{temp_paths}\n{proxied}}}\n"
    )
    conf = directory / "nginx.conf"
    conf.write_text(config)
    proc = subprocess.Popen(
        [binary, "-p", f"{directory}/", "-c", str(conf), "-e", str(directory / "error.log"), "-g", "daemon off;"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (directory / "error.log").read_text() if (directory / "error.log").exists() else ""
                raise RuntimeError(f"nginx did not listen on {port}:\n{log}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        # Workers that outlived their master would keep the port; the group takes them along.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)
