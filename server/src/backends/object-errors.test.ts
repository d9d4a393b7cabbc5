import { S3ServiceException } from "@aws-sdk/client-s3";
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

  it("maps a store out of space to RESOURCE_EXHAUSTED through both SDK mappings", () => {
    // How each client reports MinIO refusing a write at its free-space threshold (507), and a
    // drive that filled mid-write (500 InternalError whose text names the cause).
    const s3Full = new S3ServiceException({
      name: "XMinioStorageFull",
      $fault: "server",
      $metadata: { httpStatusCode: 507 },
      message: "Storage backend has reached its minimum free drive threshold.",
    });
    const s3MidWrite = new S3ServiceException({
      name: "InternalError",
      $fault: "server",
      $metadata: { httpStatusCode: 500 },
      message:
        "We encountered an internal error, please try again.: cause(no space left on device)",
    });
    const minioFull = Object.assign(
      new Error("Storage backend has reached its minimum free drive threshold."),
      {
        code: "XMinioStorageFull",
      },
    );
    const minioMidWrite = Object.assign(
      new Error(
        "We encountered an internal error, please try again.: cause(no space left on device)",
      ),
      { code: "InternalError" },
    );
    for (const mapped of [
      fromS3Error(s3Full, "k"),
      fromS3Error(s3MidWrite, "k"),
      fromMinioError(minioFull, "k"),
      fromMinioError(minioMidWrite, "k"),
    ]) {
      expect(mapped.code).toBe(Code.ResourceExhausted);
      expect(mapped.rawMessage).toBe(
        'the object store is out of space (key "k"); free space or grow the store, then retry',
      );
    }
    // Any other internal error stays a transient one.
    const other = new S3ServiceException({
      name: "InternalError",
      $fault: "server",
      $metadata: { httpStatusCode: 500 },
      message: "We encountered an internal error, please try again.",
    });
    expect(fromS3Error(other, "k").code).toBe(Code.Unavailable);
  });
});
