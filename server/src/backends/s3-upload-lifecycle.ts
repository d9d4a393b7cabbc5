import { createHash } from "node:crypto";
import {
  GetBucketLifecycleConfigurationCommand,
  type LifecycleRule,
  PutBucketLifecycleConfigurationCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import { fromS3Error } from "./from-s3-error.js";

/** What ensureIncompleteUploadExpiry found: a rule already in force, or the one it added. */
export type IncompleteUploadExpiry = "present" | "added";

/** Answers of stores that do not take the rule (MinIO refuses it as malformed). */
const ruleRefusals: ReadonlySet<string> = new Set([
  "MalformedXML",
  "InvalidArgument",
  "InvalidRequest",
  "NotImplemented",
]);

/**
 * ensureIncompleteUploadExpiry makes sure the bucket's lifecycle configuration aborts
 * multipart uploads under `prefix` at most `days` days after they were initiated
 * (`AbortIncompleteMultipartUpload`), so an upload cut off by a crash of the store or of every
 * replica is removed by the store even when no sweep can list it.
 *
 * Guarantees: an enabled rule that already covers the prefix (its own prefix is one of ours,
 * with no tag or size filter) within `days` is left as it is ("present"); otherwise every
 * other rule is kept and one rule of Spillway's own (ID `spillway-abort-incomplete-uploads-`
 * plus a hash of the prefix, replacing an earlier one of that ID) is added, then read back
 * ("added"). It needs `s3:GetLifecycleConfiguration` and `s3:PutLifecycleConfiguration` on the
 * bucket: without them it rejects with PERMISSION_DENIED; a store that refuses the rule, or
 * accepts it and drops it (MinIO does both), is UNIMPLEMENTED. Two replicas starting at once
 * add the same rule; an operator's edit made between the read and the write is lost, as with
 * any read-modify-write of a bucket's configuration.
 */
export async function ensureIncompleteUploadExpiry(
  client: S3Client,
  bucket: string,
  prefix: string,
  days: number,
  signal?: AbortSignal,
): Promise<IncompleteUploadExpiry> {
  if (!Number.isSafeInteger(days) || days < 1) {
    throw new ConnectError(`days must be a positive integer, got ${days}`, Code.InvalidArgument);
  }
  const id = `spillway-abort-incomplete-uploads-${createHash("sha256").update(prefix).digest("hex").slice(0, 16)}`;
  const read = async () => {
    try {
      const out = await client.send(
        new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }),
        {
          abortSignal: signal,
        },
      );
      return { rules: out.Rules ?? [], minimumSize: out.TransitionDefaultMinimumObjectSize };
    } catch (err) {
      if (nameOf(err) === "NoSuchLifecycleConfiguration") {
        return { rules: [], minimumSize: undefined };
      }
      throw refusal(err, bucket);
    }
  };
  const covers = (rule: LifecycleRule) => {
    const after = rule.AbortIncompleteMultipartUpload?.DaysAfterInitiation;
    const filter = rule.Filter;
    const onlyPrefix =
      filter?.Tag === undefined &&
      filter?.And === undefined &&
      filter?.ObjectSizeGreaterThan === undefined &&
      filter?.ObjectSizeLessThan === undefined;
    const rulePrefix = filter?.Prefix ?? rule.Prefix ?? "";
    return (
      rule.Status === "Enabled" &&
      after !== undefined &&
      after <= days &&
      onlyPrefix &&
      prefix.startsWith(rulePrefix)
    );
  };

  const before = await read();
  if (before.rules.some(covers)) return "present";
  const rules: LifecycleRule[] = [
    ...before.rules.filter((rule) => rule.ID !== id),
    {
      ID: id,
      Status: "Enabled",
      Filter: { Prefix: prefix },
      AbortIncompleteMultipartUpload: { DaysAfterInitiation: days },
    },
  ];
  try {
    await client.send(
      new PutBucketLifecycleConfigurationCommand({
        Bucket: bucket,
        LifecycleConfiguration: { Rules: rules },
        ...(before.minimumSize === undefined
          ? {}
          : { TransitionDefaultMinimumObjectSize: before.minimumSize }),
      }),
      { abortSignal: signal },
    );
  } catch (err) {
    throw refusal(err, bucket);
  }
  if (!(await read()).rules.some(covers)) {
    throw new ConnectError(
      `bucket ${bucket} accepted an AbortIncompleteMultipartUpload lifecycle rule but does not keep it`,
      Code.Unimplemented,
    );
  }
  return "added";
}

function nameOf(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "name" in err && typeof err.name === "string"
    ? err.name
    : undefined;
}

function refusal(err: unknown, bucket: string): ConnectError {
  const name = nameOf(err);
  if (name !== undefined && ruleRefusals.has(name)) {
    return new ConnectError(
      `bucket ${bucket} does not take AbortIncompleteMultipartUpload lifecycle rules (${name})`,
      Code.Unimplemented,
    );
  }
  return fromS3Error(err, undefined, bucket);
}
