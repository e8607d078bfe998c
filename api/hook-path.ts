/**
 * `POST /hooks/{token}` (spec part A 1.1): public, its path token a credential. The middleware
 * that must treat it apart (no bearer token, the raw body kept) and the logs that must not show
 * its token read the path here.
 */
export const HOOK_PATH = /^\/hooks\/[^/]+$/;

/** The path as logs may show it: a hook's token is replaced, every other path is kept. */
export function loggablePath(path: string): string {
  return HOOK_PATH.test(path) ? '/hooks/[token]' : path;
}
