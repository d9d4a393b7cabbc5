import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spillwayClientCli } from "./support/package-bins.js";
import { runCli } from "./support/run-cli.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** ESC, CSI as one C1 character, BEL, and DEL: what rewrites a terminal's title, screen, colours. */
const ESC = "\u001b";
const CSI = "\u009b";
const hostileName = `evil${ESC}]0;owned\u0007${ESC}[2J${CSI}31m\u007fname`;
const hostileType = `text/plain${ESC}[5m`;
/** Any C0 control but tab and newline, DEL or C1: what a terminal may act on. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const TERMINAL_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/**
 * Names, content types and stored lines are chosen by whoever stored the output (an agent, a
 * tool's output): `spillway-cli`'s text for people shows their control characters escaped, so
 * listing or searching a hostile output cannot rewrite the terminal it is read in. `cat`, and
 * `grep` into a pipe, still give the bytes as they are, as coreutils cat and GNU grep do.
 */
describe("spillway-cli shows control characters escaped to a person", () => {
  const dir = scratchDir("spillway-cli-controls-");
  let spillway: SpillwayProcess;
  const env = () => ({ ...process.env, SPILLWAY_URL: spillway.url });
  const cli = (args: readonly string[]): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [spillwayClientCli, ...args], { encoding: "utf8", env: env() });
  /** Runs the CLI with stdout and stderr on a pseudo-terminal (util-linux `script`). */
  const onTerminal = (args: readonly string[]): SpawnSyncReturns<string> =>
    spawnSync(
      "script",
      [
        "-qec",
        [process.execPath, spillwayClientCli, ...args].map(shellQuote).join(" "),
        "/dev/null",
      ],
      { encoding: "utf8", env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
  const lines = `ok\n${ESC}]0;owned\u0007${ESC}[2J ERROR here\n${CSI}31m ERROR c1\n`;

  beforeAll(async () => {
    spillway = await spawnSpillway(["--backend", "memory"]);
    const file = join(dir, "hostile.log");
    writeFileSync(file, lines);
    const put = cli([
      "put",
      "--call-id",
      "h",
      "--name",
      hostileName,
      "--content-type",
      hostileType,
      "r",
      file,
    ]);
    expect(put.stderr).toBe("");
    expect(put.stdout).toBe("res_h\n");
  });
  afterAll(() => spillway?.stop());

  it("ls and stat print a hostile name and content type escaped", () => {
    const ls = cli(["ls", "r"]);
    expect(ls.status).toBe(0);
    expect(ls.stdout).not.toMatch(TERMINAL_CONTROL);
    expect(ls.stdout).toContain("evil\\x1b]0;owned\\x07\\x1b[2J\\u009b31m\\x7fname");
    expect(ls.stdout).toContain("text/plain\\x1b[5m");
    const stat = cli(["stat", "r", "res_h"]);
    expect(stat.status).toBe(0);
    expect(stat.stdout).not.toMatch(TERMINAL_CONTROL);
    expect(stat.stdout).toContain("name:         evil\\x1b]0;owned");
  });

  it("--json escapes C1 and DEL too, and still parses back to the stored name", () => {
    const ls = cli(["ls", "--json", "r"]);
    expect(ls.status).toBe(0);
    expect(ls.stdout).not.toMatch(TERMINAL_CONTROL);
    const parsed = JSON.parse(ls.stdout) as { outputs: { name: string; content_type: string }[] };
    expect(parsed.outputs[0]?.name).toBe(hostileName);
    expect(parsed.outputs[0]?.content_type).toBe(hostileType);
  });

  it("grep on a terminal escapes the lines; into a pipe it gives grep's bytes", () => {
    const tty = onTerminal(["grep", "-n", "ERROR", "r", "res_h"]);
    expect(tty.status).toBe(0);
    // The terminal's line discipline turns each newline into CR LF.
    const shown = tty.stdout.replaceAll("\r\n", "\n");
    expect(shown).not.toMatch(TERMINAL_CONTROL);
    expect(shown).toContain("2:\\x1b]0;owned\\x07\\x1b[2J ERROR here");
    expect(shown).toContain("3:\\u009b31m ERROR c1");
    const piped = cli(["grep", "ERROR", "r", "res_h"]);
    expect(piped.stdout).toBe(lines.split("\n").slice(1).join("\n"));
  });

  it("error messages show a hostile argument escaped", async () => {
    const flag = cli(["ls", `--bogus${ESC}[2J`]);
    expect(flag.status).toBe(2);
    expect(flag.stderr).not.toMatch(TERMINAL_CONTROL);
    const command = cli([`b${ESC}[2Jad`]);
    expect(command.status).toBe(2);
    expect(command.stderr).not.toMatch(TERMINAL_CONTROL);
    const viaServer = await runCli([`b${ESC}[2Jad`], { SPILLWAY_URL: spillway.url });
    expect(viaServer.code).toBe(2);
    expect(viaServer.stderr).not.toMatch(TERMINAL_CONTROL);
    // A message of several lines keeps them: only what could drive the terminal is escaped.
    const ambiguous = cli(["tail", "-n", "-1", "r", "res_h"]);
    expect(ambiguous.status).toBe(2);
    expect(ambiguous.stderr.split("\n").length).toBeGreaterThan(3);
    expect(ambiguous.stderr).not.toContain("\\x0a");
  });
});

function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
