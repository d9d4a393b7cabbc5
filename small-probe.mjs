import { randomBytes } from "node:crypto";
import { createSpillwayClient } from "/work/main/dist/clients/ts/src/client.js";
const client = createSpillwayClient({ baseUrl: process.argv[2] });
const payloads = Array.from({ length: 64 }, () => randomBytes(4096));
let next = 0;
await Promise.all(Array.from({ length: 32 }, async () => { while (next < Number(process.argv[3])) { const i = next++; await client.offload({ tenant: "dev", runId: `r-${process.pid}`, callId: `c${i}` }, payloads[i % 64]); } }));
process.exit(0);
