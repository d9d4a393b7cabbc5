import { describe, expect, it } from "vitest";
import { BACKEND_FLAGS, BACKEND_USAGE, backendFromOptions } from "./backend-config.js";

type Flags = Partial<Record<keyof typeof BACKEND_FLAGS, string>>;

/** Builds the backend the flags name, as the CLI does, and closes it again. */
async function build(flags: Flags): Promise<string> {
  const { backend, kind } = await backendFromOptions((flag) => flags[flag]);
  await backend.close();
  return kind;
}

const s3 = { backend: "s3", "s3-bucket": "b", "s3-endpoint": "http://127.0.0.1:9" } as const;

describe("backendFromOptions", () => {
  it("accepts true and false for the s3 backend's boolean flags", async () => {
    for (const value of ["true", "false"]) {
      expect(await build({ ...s3, "s3-sign-payload": value, "s3-path-style": value })).toBe("s3");
    }
  });

  it("refuses any other spelling, naming the flag", async () => {
    await expect(build({ ...s3, "s3-sign-payload": "yes" })).rejects.toThrow(
      '--s3-sign-payload must be true or false, got "yes"',
    );
    await expect(build({ ...s3, "s3-path-style": "1" })).rejects.toThrow(
      '--s3-path-style must be true or false, got "1"',
    );
  });

  it("refuses --s3-sign-payload for the minio backend, whose client decides by the scheme", async () => {
    await expect(build({ ...s3, backend: "minio", "s3-sign-payload": "true" })).rejects.toThrow(
      "--s3-sign-payload applies to --backend s3 only",
    );
  });

  it("documents every flag in the usage text", () => {
    for (const [flag, env] of Object.entries(BACKEND_FLAGS)) {
      expect(BACKEND_USAGE).toContain(`--${flag}`);
      expect(BACKEND_USAGE).toContain(env);
    }
  });
});
