/**
 * listenerWarningsOf runs `fn` and returns the MaxListenersExceededWarning messages Node emitted
 * meanwhile (Node emits a warning on the turn of the event loop after the listener that crossed
 * the bound, so one turn is waited out before collecting stops).
 */
export async function listenerWarningsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const warnings: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === "MaxListenersExceededWarning") warnings.push(w.message);
  };
  process.on("warning", onWarning);
  try {
    await fn();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("warning", onWarning);
  }
  return warnings;
}
