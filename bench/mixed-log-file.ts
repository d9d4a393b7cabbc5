import { type LogFile, writeLines } from "./log-file.js";

/** One line in this many carries the phrase the searches look for: about 50 in a 1 GiB log. */
const rareEvery = 125_000;
const levels = ["DEBUG", "INFO ", "INFO ", "INFO ", "INFO ", "WARN ", "ERROR"];
const services = ["api", "auth", "billing", "search", "worker", "scheduler", "gateway", "indexer"];
const regions = ["eu-west-1", "us-east-2", "ap-south-1", "sa-east-1"];
/**
 * Everyday words of service logs. Every byte of the searched phrase (`session token expired`)
 * occurs in them, most of its words on their own too, so no byte of it is rare and partial
 * matches are everywhere: the case a rarest-byte scan cannot skip through.
 */
const words = (
  "request response session token user order payment retry timeout connection pool cache " +
  "expired expires refresh renewed queue message consumer producer partition offset commit " +
  "rollback transaction database query index shard replica leader follower election heartbeat " +
  "latency threshold exceeded budget limit quota tenant account invoice refund charge settled " +
  "pending accepted rejected started finished scheduled skipped deferred resumed stopped " +
  "healthy degraded unavailable restored upstream downstream handshake certificate rotated " +
  "signature verified denied granted scope audience issuer subject claims nonce state"
).split(" ");

/** mulberry32: a small deterministic generator, so the same size always gives the same bytes. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * writeMixedLogFile writes a log of at least `bytes` bytes of varied lines (levels, services,
 * hex ids, numbers and 4-9 words of a service-log vocabulary each, ~170 bytes on average) to
 * `path`, deterministic, with the phrase `session token expired` on one line in 125,000 only,
 * though its bytes and words are everywhere: the realistic log of issue 26, item 4, where the
 * pattern's bytes are common. Those lines alone have a latency of five digits
 * (`latency_ms=[0-9]{5}`, whose text is on every line).
 */
export async function writeMixedLogFile(path: string, bytes: number): Promise<LogFile> {
  const next = random(0x5eed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T;
  const hex8 = () =>
    Math.floor(next() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
  let rare = 0;
  const written = await writeLines(path, bytes, (line) => {
    const second = Math.floor(line / 500) % 86_400;
    const clock = `${String(Math.floor(second / 3600)).padStart(2, "0")}:${String(Math.floor(second / 60) % 60).padStart(2, "0")}:${String(second % 60).padStart(2, "0")}.${String(line % 1000).padStart(3, "0")}`;
    const count = 4 + Math.floor(next() * 6);
    const said: string[] = [];
    for (let k = 0; k < count; k++) said.push(pick(words));
    // Never the phrase by chance: a "session token expired" the words happen to make is cut.
    let msg = said.join(" ").replaceAll("session token expired", "session token renewed");
    const isRare = line % rareEvery === rareEvery - 1;
    if (isRare) {
      msg = `${said.slice(0, 2).join(" ")} session token expired for ${pick(words)}`;
      rare++;
    }
    // The rare lines are slow ones too: five digits, where every other line has one to four.
    const latency = Math.floor(next() * (isRare ? 50_000 : 2000)) + (isRare ? 10_000 : 0);
    return `2026-11-30T${clock}Z ${isRare ? "ERROR" : pick(levels)} [${pick(services)}-${Math.floor(next() * 16)}] trace=${hex8()}${hex8()} user=u${Math.floor(next() * 100_000)} msg="${msg}" latency_ms=${latency} region=${pick(regions)}\n`;
  });
  return {
    path,
    ...written,
    rareLiteral: "session token expired",
    rareRegex: 'user=u[0-9]+ msg="[a-z]+ [a-z]+ session token (expired|revoked) for [a-z]+"',
    rareLines: rare,
    commonTextRegex: "latency_ms=[0-9]{5}",
  };
}
