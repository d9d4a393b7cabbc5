/**
 * The one way the inspector makes DOM: elements get their text through textContent and their
 * attributes through setAttribute, never through HTML parsing, so no byte of an output can
 * become markup or script.
 */

/** What el() puts on an element. */
export interface ElementInit {
  readonly className?: string;
  /** Text content, set as text. */
  readonly text?: string;
  readonly attrs?: Readonly<Record<string, string>>;
}

/** el creates an element of `tag` with `init` and appends `children` in order. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  init: ElementInit = {},
  children: readonly (Node | string)[] = [],
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (init.className !== undefined) node.className = init.className;
  if (init.text !== undefined) node.textContent = init.text;
  for (const [name, value] of Object.entries(init.attrs ?? {})) node.setAttribute(name, value);
  for (const child of children) {
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** byId returns the element with `id`, of the type asked for; a missing one is a page bug. */
export function byId<T extends HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`the page has no #${id}`);
  return node as T;
}
