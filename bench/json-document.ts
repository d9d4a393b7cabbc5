/**
 * jsonDocumentChunks yields a realistic minified JSON document of about `bytes` bytes: an
 * object holding metadata and an array of nested records (ids, names, numbers, booleans,
 * nulls, tags, a nested object with an array of events, and a long text field), the shape of a
 * large API or tool result. The output is deterministic for a given size.
 *
 * Guarantees each chunk is at most about `chunkBytes` bytes (a record is never split) and the
 * concatenation is one valid JSON document.
 */
export function* jsonDocumentChunks(bytes: number, chunkBytes = 1 << 20): Generator<Buffer> {
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const words = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
  ];
  const word = () => words[Math.floor(random() * words.length)] as string;
  const sentence = (n: number) => Array.from({ length: n }, word).join(" ");
  const statuses = ["ok", "failed", "pending", "retrying"];

  const head = `{"kind":"search-results","version":3,"generated":"2026-01-01T00:00:00Z","query":{"q":"status:any","page":null},"items":[`;
  const tail = `],"complete":true,"count":`;
  let written = 0;
  let parts: string[] = [head];
  let partBytes = head.length;
  let id = 0;
  while (written + partBytes + tail.length + 20 < bytes) {
    const events = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, k) => ({
      at: 1_700_000_000 + id * 10 + k,
      level: random() < 0.1 ? "error" : "info",
      latency_ms: Math.round(random() * 100000) / 100,
    }));
    const record = {
      id,
      name: `item-${id}-${word()}`,
      status: statuses[Math.floor(random() * statuses.length)],
      score: Math.round(random() * 1e6) / 1e3,
      active: random() < 0.5,
      owner: random() < 0.2 ? null : { user: word(), team: word(), roles: [word(), word()] },
      tags: Array.from({ length: Math.floor(random() * 5) }, word),
      metrics: { cpu: Math.round(random() * 10000) / 100, mem: Math.floor(random() * 1e9), events },
      description: random() < 0.1 ? sentence(200 + Math.floor(random() * 800)) : sentence(8),
    };
    const text = (id === 0 ? "" : ",") + JSON.stringify(record);
    parts.push(text);
    partBytes += text.length;
    id++;
    if (partBytes >= chunkBytes) {
      const chunk = Buffer.from(parts.join(""));
      written += chunk.length;
      yield chunk;
      parts = [];
      partBytes = 0;
    }
  }
  parts.push(tail, String(id), "}");
  yield Buffer.from(parts.join(""));
}
