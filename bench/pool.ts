/**
 * pool runs `task(0..count-1)`, each index once, with at most `inFlight` running at once; it
 * rejects with the first task that rejects.
 */
export async function pool(
  count: number,
  inFlight: number,
  task: (i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}
