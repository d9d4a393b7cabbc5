import type { ObjectServerInfo } from "./object-server.js";

/** S3BackendFlags are the `spillway serve`/`sweep` arguments and environment for one bucket. */
export interface S3BackendFlags {
  args: string[];
  env: Record<string, string>;
}

/**
 * s3BackendFlags points a `spillway` command at `bucket` on `server`: `--backend` (s3 unless
 * told), the server's endpoint and region, `--s3-prefix` when given, and its credentials in
 * the environment, as an operator would pass them.
 */
export function s3BackendFlags(
  server: ObjectServerInfo,
  bucket: string,
  opts: { backend?: "s3" | "minio"; prefix?: string } = {},
): S3BackendFlags {
  return {
    args: [
      "--backend",
      opts.backend ?? "s3",
      "--s3-endpoint",
      server.endpoint,
      "--s3-bucket",
      bucket,
      ...(opts.prefix === undefined ? [] : ["--s3-prefix", opts.prefix]),
      "--s3-region",
      server.region,
    ],
    env: { AWS_ACCESS_KEY_ID: server.accessKeyId, AWS_SECRET_ACCESS_KEY: server.secretAccessKey },
  };
}
