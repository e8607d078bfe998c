export type Jose = typeof import('jose', { with: { 'resolution-mode': 'import' } });

let josePromise: Promise<Jose> | undefined;

/** jose ships ECMAScript modules only: loaded on first use, from CommonJS modules. */
export const loadJose = (): Promise<Jose> => (josePromise ??= import('jose'));
