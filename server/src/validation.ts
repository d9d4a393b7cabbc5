import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { pathToString } from "@bufbuild/protobuf/reflect";
import { createValidator } from "@bufbuild/protovalidate";
import { Code, ConnectError } from "@connectrpc/connect";
import { malformedDurations } from "./duration-form.js";
import { schemaPatternMatch } from "./schema-pattern-match.js";

// Every rule Spillway declares is a standard rule, so no registry of extensions is needed.
const validator = createValidator({ regexMatch: schemaPatternMatch });

/**
 * validateRequest checks a request against the rules declared in the proto files
 * (protovalidate) and throws INVALID_ARGUMENT naming every violated field, e.g.
 * `header.key.run_id: value length must be at least 1 characters`; a Duration the protobuf
 * spec does not allow (see malformedDurations) is refused first, since its rules would
 * measure it wrongly.
 *
 * This is the only place request shape is checked; handlers rely on it and check only what
 * needs the caller's identity or stored state.
 */
export function validateRequest<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  fieldPrefix = "",
): void {
  const malformed = malformedDurations(schema, message, fieldPrefix);
  if (malformed.length > 0) throw new ConnectError(malformed.join("; "), Code.InvalidArgument);
  const result = validator.validate(schema, message);
  if (result.kind === "valid") return;
  if (result.kind === "error") {
    throw new ConnectError(`validation failed: ${result.error.message}`, Code.Internal);
  }
  const details = result.error.violations.map((v) => {
    // A rule of the message itself names no field: the prefix alone, if any, says where.
    const where = `${fieldPrefix}${pathToString(v.field)}`.replace(/\.$/, "");
    return where === "" ? v.message : `${where}: ${v.message}`;
  });
  throw new ConnectError(details.join("; "), Code.InvalidArgument);
}
