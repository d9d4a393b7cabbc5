import { createRequire } from "node:module";
import type { Interceptor } from "@connectrpc/connect";

/** The part of `@opentelemetry/api` used here, so the client needs neither it nor its types. */
interface OpenTelemetryApi {
  readonly context: { active(): unknown };
  readonly propagation: {
    inject(
      context: unknown,
      carrier: Headers,
      setter: { set(carrier: Headers, key: string, value: string): void },
    ): void;
  };
}

const headerSetter = {
  set: (headers: Headers, key: string, value: string) => headers.set(key, value),
};

/** The application's `@opentelemetry/api`, or undefined when it is not installed. */
function installedOpenTelemetryApi(): OpenTelemetryApi | undefined {
  try {
    return createRequire(import.meta.url)("@opentelemetry/api") as OpenTelemetryApi;
  } catch {
    return undefined;
  }
}

/**
 * createTracePropagation returns an interceptor that writes the active OpenTelemetry context
 * into every call's headers (W3C `traceparent` and `tracestate`, or whatever propagator the
 * application registered), so the server's span of the call joins the caller's trace; or
 * undefined when `@opentelemetry/api` (an optional peer dependency) is not installed. With the
 * API but no SDK registered the propagator is a no-op and no header is written.
 */
export function createTracePropagation(): Interceptor | undefined {
  const api = installedOpenTelemetryApi();
  if (api === undefined) return undefined;
  return (next) => (req) => {
    api.propagation.inject(api.context.active(), req.header, headerSetter);
    return next(req);
  };
}
