import { stripAnsi } from "@spillway/wire";

/**
 * modelText is a tool result's text as the SDK shows it to a model: without terminal escape
 * sequences (CSI, OSC and other ESC sequences, and their 8-bit forms), by the same rules the
 * server renders windows and previews with (@spillway/wire's stripAnsi, pinned by
 * conformance/ansi-strip-vectors.json), unless `keepAnsi`. It changes only what the model
 * sees; what is offloaded is the result as given.
 */
export function modelText(text: string, keepAnsi = false): string {
  return keepAnsi ? text : stripAnsi(text);
}
