import path from 'node:path';
import type { Logger } from 'pino';
import { AiProviderRegistry } from '../core/ai/provider';
import { ExtensionRegistry } from '../core/extensions';
import { startPluginHost } from '../runtime/plugins';
import { sealTools } from '../tools/registry';

export interface LoadedExtensions {
  extensions: ExtensionRegistry;
  aiProviders: AiProviderRegistry;
  stop(): Promise<void>;
}

/**
 * Fills the process's registries (spec part A 1.3): built-ins are in them already (the AI
 * providers' in the registry passed in); the plugins of
 * `--plugins-dir` are started and registered in filename order; then every registry is sealed,
 * before the process serves. A directory that cannot be read stops the start; a plugin that fails
 * is logged and skipped (runtime/plugins.ts).
 */
export async function loadExtensions(
  pluginsDir: string | undefined,
  logger: Logger,
  aiProviders: AiProviderRegistry = new AiProviderRegistry(),
): Promise<LoadedExtensions> {
  const extensions = new ExtensionRegistry();
  let stop = async () => {};
  if (pluginsDir) {
    const dir = path.resolve(pluginsDir);
    const host = await startPluginHost(dir, { extensions, aiProviders }, logger);
    stop = host.stop;
    logger.info({ pluginsDir: dir, loaded: host.plugins.map((p) => path.basename(p.file)) }, 'plugins loaded (--plugins-dir)');
  }
  extensions.seal();
  aiProviders.seal();
  sealTools();
  return { extensions, aiProviders, stop };
}
