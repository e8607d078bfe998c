export default async function globalTeardown(): Promise<void> {
  await globalThis.__cairnTestEnv?.teardown();
  await globalThis.__cairnTestPostgres?.stop();
}
