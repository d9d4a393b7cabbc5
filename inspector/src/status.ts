import { errorText } from "./client.js";
import { byId } from "./dom.js";
import { visibleText } from "./format.js";

/** StatusLine is the page's one line of progress and errors, read out to screen readers. */
export interface StatusLine {
  /** Shows that something is under way. */
  busy(text: string): void;
  /** Shows a plain message. */
  message(text: string): void;
  /** Shows a failure as its gRPC code and message, marked as an error. */
  error(err: unknown): void;
  /** Empties the line. */
  clear(): void;
}

/** createStatusLine binds the #status element. */
export function createStatusLine(): StatusLine {
  const line = byId<HTMLParagraphElement>("status");
  const show = (text: string, error: boolean) => {
    // Messages quote run ids and handles, which may hold bidi overrides or escapes.
    line.textContent = visibleText(text);
    line.classList.toggle("error", error);
  };
  return {
    busy: (text) => show(text, false),
    message: (text) => show(text, false),
    error: (err) => show(errorText(err), true),
    clear: () => show("", false),
  };
}
