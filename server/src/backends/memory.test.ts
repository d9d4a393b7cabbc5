import { describeBackendContract } from "./contract.js";
import { createMemoryBackend } from "./memory.js";

describeBackendContract("memory", async () => ({
  backend: createMemoryBackend(),
  cleanup: async () => {},
}));
