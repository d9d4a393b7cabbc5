import { Code, ConnectError } from "@connectrpc/connect";

/** The smallest part S3 accepts for every part of a multipart upload but the last. */
const minPartBytes = 5 * 1024 * 1024;
/** The largest part S3 accepts. */
const maxPartBytes = 5 * 1024 * 1024 * 1024;
/** Part size used when the options name none. */
const defaultPartBytes = 8 * 1024 * 1024;

/** s3BatchLimit is the most keys one ListObjectsV2 page or DeleteObjects call handles. */
export const s3BatchLimit = 1000;

/** maxParts is the most parts one S3 multipart upload may have. */
export const maxParts = 10_000;

/**
 * checkPartSize validates the multipart part size of an S3-protocol backend and fills in the
 * default (8 MiB).
 *
 * Guarantees: the result is an integer from 5 MiB to 5 GiB, the part sizes S3 accepts;
 * anything else is `INVALID_ARGUMENT`. Both S3-protocol backends check through it.
 */
export function checkPartSize(partSizeBytes: number | undefined): number {
  const partSize = partSizeBytes ?? defaultPartBytes;
  if (!Number.isSafeInteger(partSize) || partSize < minPartBytes || partSize > maxPartBytes) {
    throw new ConnectError(
      `partSizeBytes must be an integer from ${minPartBytes} to ${maxPartBytes}, got ${partSize}`,
      Code.InvalidArgument,
    );
  }
  return partSize;
}
