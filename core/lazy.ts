/**
 * A value made on first use and kept: for a module most processes never need (the MCP SDK, SAML),
 * loaded by the first request that does rather than by every server start and test file.
 */
export function lazy<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}
