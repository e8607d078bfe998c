/**
 * The seams extensions fill (spec part A 1.3): notifiers, static and dynamic secret sources. Tools
 * are in tools/registry.ts and AI providers in core/ai/provider.ts; those registries and this one
 * are filled while the process starts (built-ins, compiled-in extensions, then plugins in filename
 * order) and sealed before it serves. Registering after the seal, an empty name or a taken name
 * is refused.
 */

/** What a notifier is told of a terminal top-level run; extra vars are redacted before it is built. */
export interface ExtensionRunEvent {
  runId: string;
  tool: string;
  status: string;
  exitCode: number | null;
  labels: Record<string, string>;
  startedAt: string | null;
  finishedAt: string | null;
  url: string;
  extraVars: Record<string, unknown>;
}

export interface ExtensionNotifier {
  notify(event: ExtensionRunEvent, signal: AbortSignal): Promise<void>;
}

export interface StaticSecretSource {
  resolve(ref: string, signal: AbortSignal): Promise<string>;
}

export interface SecretLease {
  value: string;
  leaseId: string;
  ttlSeconds: number;
}

export interface DynamicSecretSource {
  mint(ref: string, runId: string, signal: AbortSignal): Promise<SecretLease>;
  /** Ends the lease in the process that minted it. */
  revoke(leaseId: string, signal: AbortSignal): Promise<void>;
}

export type ExtensionKind = 'notifier' | 'secret source';

class SealedRegistry<T> {
  private readonly entries = new Map<string, T>();
  private sealed = false;

  constructor(private readonly kind: string) {}

  register(name: string, entry: T): void {
    if (this.sealed) throw new Error(`${this.kind} ${JSON.stringify(name)} registered after startup`);
    if (!name.trim() || name !== name.trim()) throw new Error(`a ${this.kind} needs a name`);
    if (this.entries.has(name)) throw new Error(`${this.kind} ${JSON.stringify(name)} is already registered`);
    this.entries.set(name, entry);
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  get(name: string): T | undefined {
    return this.entries.get(name);
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  seal(): void {
    this.sealed = true;
  }
}

/** The process's extension registries besides tools and AI providers. */
export class ExtensionRegistry {
  readonly notifiers = new SealedRegistry<ExtensionNotifier>('notifier');
  /** Static and dynamic sources share one namespace: a credential names a source, whichever kind. */
  readonly secretSources = new SealedRegistry<{ kind: 'static'; source: StaticSecretSource } | { kind: 'dynamic'; source: DynamicSecretSource }>('secret source');

  seal(): void {
    this.notifiers.seal();
    this.secretSources.seal();
  }
}
