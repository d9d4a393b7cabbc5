import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import type { ListPage } from "./client.js";

type ResultAttachment = ListPage["attachments"][number];

/**
 * AttachmentJson is an output's record as plain JSON: the proto's snake_case names, sizes as
 * numbers, times as ISO 8601 or null, the storage tier as a word. No preview.
 */
export interface AttachmentJson {
  readonly handle: string;
  readonly name: string;
  readonly slot: string;
  readonly content_type: string;
  readonly size_bytes: number;
  readonly observed_bytes: number;
  readonly line_count: number;
  readonly binary: boolean;
  readonly truncated: boolean;
  readonly readable: boolean;
  readonly stored: "inline" | "blob" | "preview_only" | "unspecified";
  readonly sha256: string;
  readonly create_time: string | null;
  readonly expire_time: string | null;
}

const STORED = {
  [Storage.UNSPECIFIED]: "unspecified",
  [Storage.INLINE]: "inline",
  [Storage.BLOB]: "blob",
  [Storage.PREVIEW_ONLY]: "preview_only",
} as const;

/**
 * attachmentJson is `a`'s record as AttachmentJson, for tools that print or return outputs as
 * JSON. Sizes are exact below 2^53, which no stored output reaches; an unknown storage tier
 * reads as `unspecified`.
 */
export function attachmentJson(a: ResultAttachment): AttachmentJson {
  return {
    handle: a.handle,
    name: a.name,
    slot: a.slot,
    content_type: a.contentType,
    size_bytes: Number(a.sizeBytes),
    observed_bytes: Number(a.observedBytes),
    line_count: Number(a.lineCount),
    binary: a.binary,
    truncated: a.truncated,
    readable: a.readable,
    stored: STORED[a.stored] ?? "unspecified",
    sha256: a.sha256,
    create_time: a.createTime === undefined ? null : timestampDate(a.createTime).toISOString(),
    expire_time: a.expireTime === undefined ? null : timestampDate(a.expireTime).toISOString(),
  };
}
