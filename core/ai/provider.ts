/**
 * The AI provider seam (spec part A 1.3): a factory builds a provider from a model name, an
 * endpoint URL and an API key, and throws when they cannot work (checked once at startup); the
 * provider turns a system instruction and a user prompt into text. Advice only: nothing a provider
 * answers is ever acted on without a person.
 *
 * One registry serves the built-in backends and the ones plugins declare. It is filled while the
 * process starts (built-ins first, then plugins in filename order) and sealed before serving:
 * registering after the seal, an empty name or a taken name is refused.
 */
export interface AiProviderSettings {
  model: string;
  endpoint: string;
  apiKey: string;
}

export interface AiCompletionRequest {
  system: string;
  prompt: string;
  /** Ends the call early (a timeout, or the caller went away). */
  signal?: AbortSignal;
}

export interface AiProvider {
  complete(request: AiCompletionRequest): Promise<string>;
}

export type AiProviderFactory = (settings: AiProviderSettings) => AiProvider;

export class AiProviderRegistry {
  private readonly factories = new Map<string, AiProviderFactory>();
  private sealed = false;

  register(name: string, factory: AiProviderFactory): void {
    if (this.sealed) throw new Error(`AI provider ${JSON.stringify(name)} registered after startup`);
    if (!name.trim()) throw new Error('an AI provider needs a name');
    if (this.factories.has(name)) throw new Error(`AI provider ${JSON.stringify(name)} is already registered`);
    this.factories.set(name, factory);
  }

  has(name: string): boolean {
    return this.factories.has(name);
  }

  names(): string[] {
    return [...this.factories.keys()].sort();
  }

  /** Builds the named provider; throws naming the provider when it is unknown or its settings fail. */
  build(name: string, settings: AiProviderSettings): AiProvider {
    const factory = this.factories.get(name);
    if (!factory) throw new Error(`unknown AI provider ${JSON.stringify(name)} (known: ${this.names().join(', ') || 'none'})`);
    return factory(settings);
  }

  seal(): void {
    this.sealed = true;
  }
}
