/**
 * Preloaded into a program under test (`node --import`), starves its event loop as a loaded
 * machine does: busy for 150 ms out of every 160 or so, so that deadlines fire between the
 * steps of a call (opening its stream, writing its requests) rather than after them. It never
 * keeps the program alive on its own.
 */
const busyMs = 150;
const idleMs = 10;

setInterval(() => {
  const end = Date.now() + busyMs;
  while (Date.now() < end) {}
}, idleMs).unref();
