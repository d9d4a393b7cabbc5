/**
 * toHeaders returns a header or trailer as Node's http and http2 modules hand it over, as a fetch
 * Headers object: pseudo-headers left out, repeated fields appended in order.
 */
export function toHeaders(node: Readonly<Record<string, string | string[] | undefined>>): Headers {
  const header = new Headers();
  for (const [name, value] of Object.entries(node)) {
    if (name.startsWith(":") || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) header.append(name, String(v));
  }
  return header;
}

/**
 * toNodeHeaders returns fetch-style Headers as the record Node's http and http2 modules take
 * (a request's header, writeHead's, addTrailers'); repeated fields come joined as Headers joins
 * them.
 */
export function toNodeHeaders(header: Headers): Record<string, string> {
  const node: Record<string, string> = {};
  header.forEach((value, name) => {
    node[name] = value;
  });
  return node;
}
