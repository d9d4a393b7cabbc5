import { Agent } from "node:https";
import { S3Client } from "@aws-sdk/client-s3";
import type { ObjectServerInfo } from "./object-server.js";

/**
 * createTestS3Client returns an S3 client for a test object server: path-style addressing,
 * the server's region and credentials, no retries so failures surface immediately, and trust
 * in the server's certificate when it serves HTTPS.
 */
export function createTestS3Client(info: ObjectServerInfo): S3Client {
  return new S3Client({
    endpoint: info.endpoint,
    region: info.region,
    forcePathStyle: true,
    maxAttempts: 1,
    ...(info.ca === undefined
      ? {}
      : { requestHandler: { httpsAgent: new Agent({ ca: info.ca }) } }),
    credentials: { accessKeyId: info.accessKeyId, secretAccessKey: info.secretAccessKey },
  });
}
