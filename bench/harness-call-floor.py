"""Times the Python SDK's per-call cost against a running Spillway, for the benchmark.

Usage: harness-call-floor.py TARGET RUN HANDLE LINE BATCHES PER_BATCH

Prints one JSON object: {"server_info_ms": [...], "window_ms": [...]}, each the median of one
batch of PER_BATCH sequential calls, after ten untimed batches as on the TypeScript side:
`server_info()`, a no-op unary call, and a 100-line window at 0-based LINE of the output behind
HANDLE, read as the model tool reads it (`rendered_only`).
"""

import json
import statistics
import sys
import time

from spillway_client import SpillwayClient


def batch_medians(call, batches: int, per_batch: int) -> list[float]:
    medians = []
    for batch in range(batches + 10):
        samples = []
        for _ in range(per_batch):
            started = time.perf_counter()
            call()
            samples.append((time.perf_counter() - started) * 1000)
        if batch >= 10:
            medians.append(statistics.median(samples))
    return medians


def main() -> None:
    target, run, handle, line, batches, per_batch = sys.argv[1:7]
    client = SpillwayClient(target)
    first = int(line) + 1

    def window() -> None:
        w = client.read_tool_output(run, handle, lines={"offset": int(line), "limit": 100}, rendered_only=True)
        if f"\n{first:>6}\t" not in w.rendered:
            raise SystemExit(f"window at {line} does not start at line {first}")

    out = {
        "server_info_ms": batch_medians(client.server_info, int(batches), int(per_batch)),
        "window_ms": batch_medians(window, int(batches), int(per_batch)),
    }
    client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
