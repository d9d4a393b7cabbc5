/**
 * TurnQueue holds the waiting items of many owners (tenants) and hands them out in turns:
 * owners in the order they take their next turn, each owner's items first come, first served,
 * so an owner with many items waiting gets no more turns than an owner with one.
 */
export interface TurnQueue<T> {
  /** Appends `item` to `owner`'s; an owner with none waiting joins the turns last. */
  push(owner: string, item: T): void;
  /**
   * The first item of the owner whose turn it is, taken out; that owner's next turn comes after
   * every other owner's. Undefined when nothing waits.
   */
  shift(): { readonly owner: string; readonly item: T } | undefined;
  /** Takes `item` out of `owner`'s, if it is there. */
  remove(owner: string, item: T): void;
  /** Whether nothing waits. */
  isEmpty(): boolean;
  /** Takes every item out, owners in turn order. */
  clear(): T[];
}

/** createTurnQueue returns an empty TurnQueue. */
export function createTurnQueue<T>(): TurnQueue<T> {
  // Owners with items waiting, in the order they take their next turn.
  const owners: string[] = [];
  const itemsOf = new Map<string, T[]>();

  return {
    push(owner, item) {
      const items = itemsOf.get(owner);
      if (items !== undefined) {
        items.push(item);
        return;
      }
      itemsOf.set(owner, [item]);
      owners.push(owner);
    },
    shift() {
      const owner = owners.shift();
      if (owner === undefined) return undefined;
      const items = itemsOf.get(owner) ?? [];
      const item = items.shift() as T;
      if (items.length > 0) owners.push(owner);
      else itemsOf.delete(owner);
      return { owner, item };
    },
    remove(owner, item) {
      const items = itemsOf.get(owner);
      const at = items?.indexOf(item) ?? -1;
      if (items === undefined || at < 0) return;
      items.splice(at, 1);
      if (items.length === 0) {
        itemsOf.delete(owner);
        owners.splice(owners.indexOf(owner), 1);
      }
    },
    isEmpty: () => owners.length === 0,
    clear() {
      const all = owners.flatMap((owner) => itemsOf.get(owner) ?? []);
      owners.length = 0;
      itemsOf.clear();
      return all;
    },
  };
}
