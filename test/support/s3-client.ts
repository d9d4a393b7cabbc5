import { S3Client } from "@aws-sdk/client-s3";
import type { ObjectServerInfo } from "./object-server.js";

/**
 * createTestS3Client returns an S3 client for a test object server: path-style addressing,
 * the server's region and credentials, and no retries so failures surface immediately.
 */
export function createTestS3Client(info: ObjectServerInfo): S3Client {
  return new S3Client({
    endpoint: info.endpoint,
    region: info.region,
    forcePathStyle: true,
    maxAttempts: 1,
    credentials: { accessKeyId: info.accessKeyId, secretAccessKey: info.secretAccessKey },
  });
}
