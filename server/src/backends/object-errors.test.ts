import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { fromMinioError } from "./from-minio-error.js";
import { fromS3Error } from "./from-s3-error.js";
import { alreadyExists, notFound, untrustedCertificate } from "./object-errors.js";

describe("object errors", () => {
  it("notFound is NOT_FOUND naming the key, and leaves the stack-trace limit as it was", () => {
    const before = Error.stackTraceLimit;
    const err = notFound("t/a/b");
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.NotFound);
    expect(err.rawMessage).toBe('object not found (key "t/a/b")');
    expect(Error.stackTraceLimit).toBe(before);
  });

  it("alreadyExists is ALREADY_EXISTS naming the key", () => {
    const err = alreadyExists("t/a/b");
    expect(err.code).toBe(Code.AlreadyExists);
    expect(err.rawMessage).toBe('object already exists (key "t/a/b")');
  });

  it("untrustedCertificate is FAILED_PRECONDITION for Node's TLS trust failures, through both SDK mappings", () => {
    for (const code of [
      "DEPTH_ZERO_SELF_SIGNED_CERT",
      "CERT_HAS_EXPIRED",
      "ERR_TLS_CERT_ALTNAME_INVALID",
    ]) {
      const err = Object.assign(new Error("certificate trouble"), { code });
      for (const mapped of [
        untrustedCertificate(err, ' (key "k")'),
        fromS3Error(err, "k"),
        fromMinioError(err, "k"),
      ]) {
        expect(mapped?.code).toBe(Code.FailedPrecondition);
        expect(mapped?.rawMessage).toContain(`[${code}]`);
        expect(mapped?.rawMessage).toContain("NODE_EXTRA_CA_CERTS");
        expect(mapped?.cause).toBe(err);
      }
    }
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    expect(untrustedCertificate(refused, "")).toBeUndefined();
    expect(untrustedCertificate("not an error", "")).toBeUndefined();
  });
});
