import { mkdir, open, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import { errnoOf, fromNodeError } from "./from-node-error.js";

const scratch = scratchDir("spillway-errors-");

/** Runs a real filesystem call that must fail and returns what it threw. */
async function failure(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("expected the filesystem call to fail");
}

/** Builds a system error the way Node does, for conditions a test cannot cause as root. */
function systemError(code: string, syscall: string, path: string): Error {
  return Object.assign(new Error(`${code}: simulated, ${syscall} '${path}'`), {
    code,
    errno: -1,
    syscall,
    path,
  });
}

describe("fromNodeError", () => {
  it("maps a real ENOENT to NOT_FOUND, naming the key and not the server path", async () => {
    const missing = join(scratch, "missing-file");
    const err = await failure(() => readFile(missing));
    const mapped = fromNodeError(err, "t/x/obj");
    expect(mapped.code).toBe(Code.NotFound);
    expect(mapped.message).toContain("t/x/obj");
    expect(mapped.message).toContain("ENOENT");
    expect(mapped.message).not.toContain(scratch);
    expect(mapped.cause).toBe(err);
  });

  it("maps a real EEXIST to ALREADY_EXISTS", async () => {
    const err = await failure(() => mkdir(scratch));
    expect(fromNodeError(err).code).toBe(Code.AlreadyExists);
  });

  it("maps a real ELOOP (symlink loop) to FAILED_PRECONDITION", async () => {
    await symlink(join(scratch, "loop-b"), join(scratch, "loop-a"));
    await symlink(join(scratch, "loop-a"), join(scratch, "loop-b"));
    const err = await failure(() => readFile(join(scratch, "loop-a")));
    expect(errnoOf(err)).toBe("ELOOP");
    expect(fromNodeError(err).code).toBe(Code.FailedPrecondition);
  });

  it("maps a real ENOTDIR and EISDIR to FAILED_PRECONDITION", async () => {
    const file = join(scratch, "plain-file");
    await writeFile(file, "x");
    const notDir = await failure(() => readFile(join(file, "child")));
    expect(errnoOf(notDir)).toBe("ENOTDIR");
    expect(fromNodeError(notDir).code).toBe(Code.FailedPrecondition);
    const isDir = await failure(() => readFile(scratch));
    expect(errnoOf(isDir)).toBe("EISDIR");
    expect(fromNodeError(isDir).code).toBe(Code.FailedPrecondition);
  });

  it("maps a real ENAMETOOLONG to INVALID_ARGUMENT", async () => {
    const err = await failure(() => open(join(scratch, "n".repeat(300))));
    expect(errnoOf(err)).toBe("ENAMETOOLONG");
    expect(fromNodeError(err).code).toBe(Code.InvalidArgument);
  });

  it("maps EROFS to FAILED_PRECONDITION saying the filesystem is read-only", () => {
    // A volume remounted read-only: no retry helps, the operator must act.
    const mapped = fromNodeError(systemError("EROFS", "open", "/srv/data/t/x"), "t/x");
    expect(mapped.code).toBe(Code.FailedPrecondition);
    expect(mapped.rawMessage).toBe('the storage filesystem is read-only (key "t/x") [open: EROFS]');
  });

  it("maps a real AbortError to CANCELED", async () => {
    const file = join(scratch, "abortable");
    await writeFile(file, "x");
    const err = await failure(() => readFile(file, { signal: AbortSignal.abort() }));
    expect(fromNodeError(err, "k").code).toBe(Code.Canceled);
  });

  it("maps EACCES and EPERM to PERMISSION_DENIED without leaking the absolute path", () => {
    for (const code of ["EACCES", "EPERM"]) {
      const mapped = fromNodeError(systemError(code, "open", "/srv/spillway/data/t/x"), "t/x");
      expect(mapped.code).toBe(Code.PermissionDenied);
      expect(mapped.message).not.toContain("/srv/spillway");
      expect(mapped.message).toContain("t/x");
    }
  });

  it("maps ENOSPC and EDQUOT to RESOURCE_EXHAUSTED", () => {
    for (const code of ["ENOSPC", "EDQUOT"]) {
      expect(fromNodeError(systemError(code, "write", "/srv/f")).code).toBe(Code.ResourceExhausted);
    }
  });

  it("maps EMFILE, ENFILE, EAGAIN and EBUSY to UNAVAILABLE", () => {
    for (const code of ["EMFILE", "ENFILE", "EAGAIN", "EBUSY"]) {
      expect(fromNodeError(systemError(code, "open", "/srv/f")).code).toBe(Code.Unavailable);
    }
  });

  it("passes an existing ConnectError through unchanged", () => {
    const original = new ConnectError("already mapped", Code.DataLoss);
    expect(fromNodeError(original, "k")).toBe(original);
  });

  it("maps unknown errnos, plain errors and non-errors to INTERNAL without their text", () => {
    const odd = fromNodeError(systemError("EXDEV", "link", "/srv/secret/path"), "k");
    expect(odd.code).toBe(Code.Internal);
    expect(odd.message).not.toContain("/srv/secret");
    const plain = fromNodeError(new Error("boom at /srv/secret"));
    expect(plain.code).toBe(Code.Internal);
    expect(plain.message).not.toContain("/srv/secret");
    expect(fromNodeError("a string").code).toBe(Code.Internal);
    expect(fromNodeError(undefined).code).toBe(Code.Internal);
  });
});

describe("errnoOf", () => {
  it("reads the errno of system errors only", () => {
    expect(errnoOf(systemError("ENOENT", "open", "/x"))).toBe("ENOENT");
    expect(errnoOf(new Error("no code"))).toBeUndefined();
    expect(
      errnoOf(Object.assign(new Error("x"), { code: "ERR_INVALID_ARG_TYPE" })),
    ).toBeUndefined();
    expect(errnoOf(null)).toBeUndefined();
  });
});
