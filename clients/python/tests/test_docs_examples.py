"""The README's agent examples and its async and batch example run as written, each with only the
extra it names, against a server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def example(importing: str) -> str:
    """The README's one python block that imports `importing`."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL) if importing in b]
    assert len(blocks) == 1, importing
    return blocks[0]


def run_example(code: str, server_url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env={**os.environ, "SPILLWAY_URL": server_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pydantic_ai_example_shows_the_servers_preview(server_url: str) -> None:
    out = run_example(example("capabilities=[SpillwayToolOutputs(spillway)]"), server_url)
    assert re.search(r"^\[res_[^\]@]+\]", out), out
    assert "200000" in out and "step 200000: compiled" in out


def test_elision_policy_example_shows_the_summary_with_the_handle(server_url: str) -> None:
    out = run_example(example("ElisionPolicy("), server_url)
    handle = re.match(r"^\[(res_[^\]@]+)\] \d+ bytes · 200000 lines · summary of the \"build_log\" output\n", out)
    assert handle, out
    assert "200000 steps, 4 failed: step 8: FAIL, step 50008: FAIL, step 100008: FAIL, step 150008: FAIL\n" in out
    assert f'[full output stored: read_tool_output(handle="{handle.group(1)}", offset=0)]' in out


def test_async_and_batch_example_answers_each_item_and_reads_a_window(server_url: str) -> None:
    out = run_example(example("await spillway.offload_batch("), server_url)
    lines = out.splitlines()
    assert lines[:3] == ["res_call-async 100000", "res_call-ls 12", "res_call-env 20"], out
    # The item naming another tenant is refused alone, with the status its own offload would get.
    assert lines[3].startswith('error: PERMISSION_DENIED header.key.tenant: "other" is not the caller'), out
    size = sum(len(f"line {i + 1} of the test log\n") for i in range(100_000))
    assert lines[4:] == [
        f"[res_call-async] lines 50000-50001 of 100000 ({size} bytes)",
        " 50000\tline 50000 of the test log",
        " 50001\tline 50001 of the test log",
        "[more: offset=50001]",
    ], out


def test_harness_example_spills_to_spillway(server_url: str) -> None:
    out = run_example(example("from spillway_client.harness import"), server_url)
    assert out.startswith("[Tool output too large"), out
    assert "Read it with read_tool_output(handle='" in out and "/res_" in out


def test_install_commands_name_the_checkout() -> None:
    """spillway-client is not on PyPI: every `pip install` the README shows installs the package
    from the checkout's folder (extras included), so a stranger's copy of it works."""
    root = README.parents[2]
    commands = re.findall(r"pip install (?:-e )?\"([^\"]+)\"", README.read_text())
    assert commands
    for spec in commands:
        folder = spec.split("[", 1)[0]
        assert (root / folder / "pyproject.toml").is_file(), f"pip install {spec!r} names no folder of the checkout"
