import { COMMANDS } from "./commands.js";
import { COMMON_EXIT_CODES } from "./exit-codes.js";

/** cliUsage is the `spillway-cli --help` text: every command, the global flags, the exit codes. */
export const cliUsage = `Usage: spillway-cli [global flags] <command> [flags] [args]
       (also spillway <command> ..., through the server's executable)

Commands:
${COMMANDS.map((c) => `  ${c.synopsis}\n      ${c.summary}`).join("\n")}

Global flags (before or after the command):
  --url <url>            SPILLWAY_URL     the service (default http://127.0.0.1:50051; https:// for TLS)
  --token <token>        SPILLWAY_TOKEN   bearer token (a flag shows in ps: prefer the variable or a file)
  --token-file <path>                     bearer token: the file's first line
  --tls-ca <pem>         SPILLWAY_TLS_CA  CA to trust instead of the system's
  --tls-cert <pem> --tls-key <pem>        client certificate for mTLS
  --json                                  print JSON for scripts (shapes: docs/cli.md)
  -h, --help

Exit status: 0 done; 1 grep matched nothing; 2 usage error; 3 local failure (a file, stdout);
10 + the gRPC code when the server refused the call:
  ${COMMON_EXIT_CODES.map(
    ([name, code], i) => `${i > 0 && i % 4 === 0 ? "\n  " : ""}${name} ${code}`,
  )
    .join(", ")
    .replaceAll(", \n", ",\n")}.
`;
