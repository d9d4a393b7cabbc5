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

  it.each(["not a url", "localhost:9000", "ftp://127.0.0.1:9000", ""])(
    "refuses --s3-endpoint %j, which would start a server whose store never answers",
    async (endpoint) => {
      for (const backend of ["s3", "minio"]) {
        await expect(build({ ...s3, backend, "s3-endpoint": endpoint })).rejects.toThrow(
          `--s3-endpoint: expected an http:// or https:// URL such as http://127.0.0.1:9000, got ${JSON.stringify(endpoint)}`,
        );
      }
    },
  );

  it("names the variable a refused endpoint came from", async () => {
    await expect(
      backendFromOptions((flag) => ({ ...s3, "s3-endpoint": "nope" })[flag as keyof typeof s3], {
        name: (flag) => `--${flag} (${BACKEND_FLAGS[flag]})`,
      }),
    ).rejects.toThrow("--s3-endpoint (SPILLWAY_S3_ENDPOINT): expected an http:// or https:// URL");
  });

  it("documents every flag in the usage text", () => {
    for (const [flag, env] of Object.entries(BACKEND_FLAGS)) {
      expect(BACKEND_USAGE).toContain(`--${flag}`);
      expect(BACKEND_USAGE).toContain(env);
    }
  });
});
