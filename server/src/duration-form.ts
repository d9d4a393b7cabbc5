import type { DescField, DescMessage } from "@bufbuild/protobuf";

/** The most seconds a google.protobuf.Duration may hold: about 10,000 years. */
const maxDurationSeconds = 315_576_000_000n;

/** Duration is the shape protobuf-es gives a google.protobuf.Duration. */
interface Duration {
  readonly seconds: bigint;
  readonly nanos: number;
}

/** Whether a message type holds a Duration anywhere below it, per type. */
const holdsDuration = new WeakMap<DescMessage, boolean>();

function fieldMessage(field: DescField): DescMessage | undefined {
  if (field.fieldKind === "message") return field.message;
  if (field.fieldKind === "list" && field.listKind === "message") return field.message;
  return undefined;
}

function hasDuration(desc: DescMessage): boolean {
  const known = holdsDuration.get(desc);
  if (known !== undefined) return known;
  // A recursive type is first taken to hold none, so the walk ends; any Duration found
  // elsewhere in it still counts.
  holdsDuration.set(desc, false);
  const found =
    desc.typeName === "google.protobuf.Duration" ||
    desc.fields.some((field) => {
      const message = fieldMessage(field);
      return message !== undefined && hasDuration(message);
    });
  holdsDuration.set(desc, found);
  return found;
}

/** Why a Duration is not one the protobuf spec allows, or undefined when it is. */
function durationFault({ seconds, nanos }: Duration): string | undefined {
  if (nanos < -999_999_999 || nanos > 999_999_999) {
    return `nanos (${nanos}) must be within ±999999999`;
  }
  if ((seconds > 0n && nanos < 0) || (seconds < 0n && nanos > 0)) {
    return `nanos (${nanos}) must have the sign of seconds (${seconds})`;
  }
  if (seconds > maxDurationSeconds || seconds < -maxDurationSeconds) {
    return `seconds (${seconds}) must be within ±${maxDurationSeconds}`;
  }
  return undefined;
}

/**
 * malformedDurations lists, as `path: reason`, every google.protobuf.Duration in a message that
 * the protobuf spec does not allow: nanos outside ±999,999,999, nanos whose sign differs from
 * non-zero seconds, or seconds beyond ±315,576,000,000. protovalidate's duration rules compare
 * values and take such a Duration as the sum of its parts, so `{seconds: 1, nanos: 1999999999}`
 * would pass an `lte: 2s` rule while standing for about 3 s. Message types without a Duration
 * are not walked; maps are not (no request holds one).
 */
export function malformedDurations(desc: DescMessage, message: unknown, prefix = ""): string[] {
  if (message === undefined || message === null || !hasDuration(desc)) return [];
  if (desc.typeName === "google.protobuf.Duration") {
    const fault = durationFault(message as Duration);
    return fault === undefined ? [] : [`${prefix.replace(/\.$/, "")}: ${fault}`];
  }
  const faults: string[] = [];
  const record = message as Record<string, unknown>;
  for (const field of desc.fields) {
    const type = fieldMessage(field);
    if (type === undefined || !hasDuration(type)) continue;
    const name = field.name;
    let value: unknown;
    if (field.oneof === undefined) {
      value = record[field.localName];
    } else {
      const chosen = record[field.oneof.localName] as { case?: string; value?: unknown };
      if (chosen?.case !== field.localName) continue;
      value = chosen.value;
    }
    if (field.fieldKind === "list") {
      (value as unknown[]).forEach((item, i) => {
        faults.push(...malformedDurations(type, item, `${prefix}${name}[${i}].`));
      });
    } else {
      faults.push(...malformedDurations(type, value, `${prefix}${name}.`));
    }
  }
  return faults;
}
