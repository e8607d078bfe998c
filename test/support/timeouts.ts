/**
 * The timeout of a hook whose first run on a machine builds a Go tool (the time-skipping server,
 * OpenTofu): minutes each, and on a fresh machine the builds of several test files overlap and
 * download their modules over one link. Beside each other they were seen to take 21 minutes (the
 * time-skipping server) and 24 (OpenTofu); later runs find them cached at once.
 */
export const FIRST_BUILD_TIMEOUT_MS = 45 * 60_000;
