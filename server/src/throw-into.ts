/**
 * throwInto throws `error` into an iterator as `yield*` does: an iterator with a `throw` method
 * takes the error and answers with its next step; one without is closed (`return`), so what it
 * holds for the call (a tenant's slot, reserved bytes) is let go, and the error is rethrown.
 */
export async function throwInto<T>(
  it: AsyncIterator<T>,
  error: unknown,
): Promise<IteratorResult<T>> {
  if (it.throw !== undefined) return it.throw(error);
  await it.return?.();
  throw error;
}
