import { it } from "vitest";
import { expectListRunsPagesEveryRunOnce } from "../../../test/support/list-runs-paging.js";
import { describeBackendContract } from "./contract.js";
import { createMemoryBackend } from "./memory.js";

describeBackendContract("memory", async () => ({
  backend: createMemoryBackend(),
  cleanup: async () => {},
}));

it("lets ListRuns page through every run of a memory backend once", async () => {
  await expectListRunsPagesEveryRunOnce(createMemoryBackend());
});
