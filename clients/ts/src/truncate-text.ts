/** TruncateMode says which part of a text a truncation keeps. */
export type TruncateMode = "head" | "tail" | "head+tail";

/**
 * countChars counts the Unicode code points of text (a surrogate pair is one character), the
 * unit every Spillway SDK measures characters in, so runtimes in other languages agree.
 */
export function countChars(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    if (!(isLowSurrogate(text.charCodeAt(i)) && i > 0 && isHighSurrogate(text.charCodeAt(i - 1)))) {
      count++;
    }
  }
  return count;
}

/**
 * truncateText keeps at most budget characters of text — the head, the tail, or both halves
 * (the head gets the odd one) — and puts a marker line where characters were left out:
 * `[… N of T chars omitted …]`. A text within budget is returned unchanged; a surrogate pair is
 * never split. The marker is not counted against the budget.
 */
export function truncateText(text: string, mode: TruncateMode, budget: number): string {
  const total = countChars(text);
  const keep = Math.max(0, Math.floor(budget));
  if (total <= keep) return text;
  const marker = `[… ${total - keep} of ${total} chars omitted …]`;
  if (mode === "head") return `${headChars(text, keep)}\n${marker}`;
  if (mode === "tail") return `${marker}\n${tailChars(text, keep)}`;
  const head = Math.ceil(keep / 2);
  return `${headChars(text, head)}\n${marker}\n${tailChars(text, keep - head)}`;
}

function headChars(text: string, n: number): string {
  let i = 0;
  for (let c = 0; c < n && i < text.length; c++) {
    i += isHighSurrogate(text.charCodeAt(i)) && isLowSurrogate(text.charCodeAt(i + 1)) ? 2 : 1;
  }
  return text.slice(0, i);
}

function tailChars(text: string, n: number): string {
  let i = text.length;
  for (let c = 0; c < n && i > 0; c++) {
    i -= isLowSurrogate(text.charCodeAt(i - 1)) && isHighSurrogate(text.charCodeAt(i - 2)) ? 2 : 1;
  }
  return text.slice(i);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
