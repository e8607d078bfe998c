/**
 * The plugin host (spec part A 1.3 rules 3-7): launches each executable of `--plugins-dir` in
 * filename order over HashiCorp go-plugin's handshake, speaks gRPC to it over mutual TLS on its
 * local socket, asks what it provides, and registers every seam it declares in the process's
 * registries (tools/registry.ts, core/ai/provider.ts, core/extensions.ts). A plugin that fails to
 * start or describe itself is logged and skipped; one declaring a taken name is skipped whole and
 * its process ended. Plugins are supervised: one that exits is started again (up to
 * RESTART_LIMIT times in a row), else marked unavailable; all end with the host.
 *
 * The wire: cairn.plugin.v1.Extension of sdk/go/proto/cairn_plugin.proto, each message a
 * google.protobuf.BytesValue holding JSON (loaded with @grpc/proto-loader).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promises as fs, constants as fsConstants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { AiProviderRegistry } from '../core/ai/provider';
import type { ExtensionRegistry, ExtensionRunEvent, SecretLease } from '../core/extensions';
import { registerTool, reservedToolName } from '../tools/registry';
import type { Tool } from '../tools/types';

/** The go-plugin handshake Cairn's SDK uses (sdk/go/plugin/serve.go Handshake). */
export const PLUGIN_HANDSHAKE = {
  protocolVersion: 1,
  magicCookieKey: 'SERVICE_EXTENSION',
  magicCookieValue: 'b1f5ab3e4d7c4c0e9a3f2d6e8c1b7a90',
} as const;

/** What a plugin tool is told, as the file named by CAIRN_PLUGIN_TOOL_SPEC in its work dir. */
export const PLUGIN_TOOL_SPEC_FILE = '.cairn-plugin-tool.json';

const START_TIMEOUT_MS = 10_000;
const CALL_TIMEOUT_MS = 10_000;
const RESTART_LIMIT = 3;

export interface HostLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

interface Description {
  tools: { name: string }[];
  notifiers: string[];
  secretSources: string[];
  dynamicSecretSources: string[];
  aiProviders: string[];
}

/** Rule 7: the only variables a plugin's environment holds, besides the handshake's. */
export function pluginEnvironment(source: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  const keep = (name: string) =>
    name === 'PATH' ||
    name === 'HOME' ||
    name === 'TMPDIR' ||
    name === 'TEMP' ||
    name === 'TMP' ||
    name === 'LANG' ||
    name === 'LANGUAGE' ||
    name.startsWith('LC_') ||
    name.startsWith('SERVICE_PLUGIN_');
  for (const [name, value] of Object.entries(source)) if (value !== undefined && keep(name)) env[name] = value;
  return env;
}

const protoPath = path.join(__dirname, '..', 'sdk', 'go', 'proto', 'cairn_plugin.proto');
let serviceCtor: grpc.ServiceClientConstructor | undefined;
function extensionClient(): grpc.ServiceClientConstructor {
  if (!serviceCtor) {
    const definition = protoLoader.loadSync(protoPath, { includeDirs: [path.dirname(protoPath)] });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as { cairn: { plugin: { v1: { Extension: grpc.ServiceClientConstructor } } } };
    serviceCtor = loaded.cairn.plugin.v1.Extension;
  }
  return serviceCtor;
}

interface ClientCert {
  certPem: string;
  keyPem: string;
}

/** The host's client certificate for mutual TLS: self-signed, made per process with openssl (what go-plugin's own client does with Go's x509). */
async function makeClientCert(): Promise<ClientCert> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-plugin-tls-'));
  try {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '30',
      '-subj', '/CN=localhost/O=Cairn', '-keyout', key, '-out', cert,
      '-addext', 'subjectAltName=DNS:localhost', '-addext', 'basicConstraints=critical,CA:TRUE',
      '-addext', 'keyUsage=digitalSignature,keyEncipherment,keyAgreement,keyCertSign',
      '-addext', 'extendedKeyUsage=serverAuth,clientAuth',
    ]);
    return { certPem: await fs.readFile(cert, 'utf8'), keyPem: await fs.readFile(key, 'utf8') };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** One line of go-plugin's handshake: CORE|APP|NETWORK-TYPE|NETWORK-ADDR|PROTOCOL|SERVER-CERT. */
export function parseHandshakeLine(line: string): { appVersion: number; network: string; address: string; protocol: string; serverCert: string } {
  const parts = line.trim().split('|');
  if (parts.length < 5) throw new Error(`not a go-plugin handshake line: ${JSON.stringify(line.slice(0, 200))}`);
  const [core, app, network, address, protocol, serverCert = ''] = parts;
  if (core !== '1') throw new Error(`go-plugin core protocol ${core} is not supported (1 is)`);
  if (Number(app) !== PLUGIN_HANDSHAKE.protocolVersion) throw new Error(`plugin protocol ${app} is not supported (${PLUGIN_HANDSHAKE.protocolVersion} is)`);
  if (protocol !== 'grpc') throw new Error(`plugin speaks ${protocol}, not grpc`);
  if (network !== 'unix' && network !== 'tcp') throw new Error(`plugin network ${network} is not supported`);
  if (!serverCert) throw new Error('plugin did not answer with a certificate for mutual TLS');
  return { appVersion: Number(app), network, address, protocol, serverCert };
}

function derToPem(base64Raw: string): string {
  const der = Buffer.from(base64Raw, 'base64');
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return `-----BEGIN CERTIFICATE-----\n${b64.trimEnd()}\n-----END CERTIFICATE-----\n`;
}

/** A started plugin process and its gRPC client. */
class PluginProcess {
  child?: ChildProcess;
  client?: grpc.Client;
  stderrTail = '';

  constructor(
    readonly file: string,
    private readonly cert: ClientCert,
    private readonly env: Record<string, string>,
  ) {}

  async start(): Promise<void> {
    const env = {
      ...this.env,
      [PLUGIN_HANDSHAKE.magicCookieKey]: PLUGIN_HANDSHAKE.magicCookieValue,
      PLUGIN_MIN_PORT: '10000',
      PLUGIN_MAX_PORT: '25000',
      PLUGIN_PROTOCOL_VERSIONS: String(PLUGIN_HANDSHAKE.protocolVersion),
      PLUGIN_CLIENT_CERT: this.cert.certPem,
    };
    const child = spawn(this.file, [], { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: path.dirname(this.file) });
    this.child = child;
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-2000);
    });
    const line = await new Promise<string>((resolve, reject) => {
      let buffered = '';
      const timer = setTimeout(() => fail(new Error(`no handshake within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      const fail = (err: Error) => {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        reject(err);
      };
      const onData = (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        const nl = buffered.indexOf('\n');
        if (nl >= 0) {
          clearTimeout(timer);
          child.stdout!.off('data', onData);
          child.off('exit', onExit);
          child.stdout!.resume();
          resolve(buffered.slice(0, nl));
        }
      };
      const onExit = (code: number | null, signal: string | null) => fail(new Error(`exited before its handshake (${signal ?? `exit code ${code}`})`));
      child.stdout!.on('data', onData);
      child.once('exit', onExit);
      child.once('error', (err) => fail(err));
    });
    const hs = parseHandshakeLine(line);
    const target = hs.network === 'unix' ? `unix://${hs.address}` : hs.address;
    const credentials = grpc.credentials.createSsl(Buffer.from(derToPem(hs.serverCert)), Buffer.from(this.cert.keyPem), Buffer.from(this.cert.certPem));
    const Ctor = extensionClient();
    this.client = new Ctor(target, credentials, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
  }

  call<T>(method: string, body: unknown, signal?: AbortSignal, timeoutMs = CALL_TIMEOUT_MS): Promise<T> {
    const client = this.client as unknown as Record<string, (req: unknown, meta: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: { value: Buffer }) => void) => grpc.ClientUnaryCall>;
    if (!client) return Promise.reject(new Error('plugin is not running'));
    return new Promise<T>((resolve, reject) => {
      const call = client[method].call(this.client, { value: Buffer.from(JSON.stringify(body)) }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
        signal?.removeEventListener('abort', onAbort);
        if (err) return reject(new Error(err.details || err.message));
        try {
          resolve(JSON.parse(Buffer.from(res?.value ?? []).toString('utf8') || '{}') as T);
        } catch (e) {
          reject(e as Error);
        }
      });
      const onAbort = () => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  stop(): void {
    this.client?.close();
    this.client = undefined;
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

/** A loaded plugin, supervised. */
export class LoadedPlugin {
  available = true;
  private restarts = 0;
  private stopping = false;

  constructor(
    readonly file: string,
    readonly description: Description,
    private proc: PluginProcess,
    private readonly relaunch: () => Promise<PluginProcess>,
    private readonly logger: HostLogger,
  ) {
    this.watch();
  }

  private watch(): void {
    this.proc.child?.once('exit', (code, signal) => {
      if (this.stopping) return;
      this.logger.warn({ plugin: this.file, code, signal, stderr: this.proc.stderrTail.slice(-500) }, 'plugin exited');
      this.proc.stop();
      void this.restart();
    });
  }

  private async restart(): Promise<void> {
    while (!this.stopping && this.restarts < RESTART_LIMIT) {
      this.restarts++;
      try {
        this.proc = await this.relaunch();
        if (this.stopping) return this.proc.stop();
        this.logger.info({ plugin: this.file, restarts: this.restarts }, 'plugin started again');
        this.watch();
        return;
      } catch (err) {
        this.logger.warn({ plugin: this.file, err: (err as Error).message }, 'plugin failed to start again');
      }
    }
    if (!this.stopping) {
      this.available = false;
      this.logger.error({ plugin: this.file }, 'plugin marked unavailable');
    }
  }

  /** A call to the plugin's service; refused while it is unavailable. */
  call<T>(method: string, body: unknown, signal?: AbortSignal): Promise<T> {
    if (!this.available) return Promise.reject(new Error(`plugin ${path.basename(this.file)} is unavailable`));
    return this.proc.call<T>(method, body, signal);
  }

  get pid(): number | undefined {
    return this.proc.child?.pid;
  }

  stop(): void {
    this.stopping = true;
    this.proc.stop();
  }
}

export interface PluginHost {
  plugins: LoadedPlugin[];
  stop(): Promise<void>;
}

export interface PluginRegistries {
  extensions: ExtensionRegistry;
  aiProviders?: AiProviderRegistry;
}

/** The tool a plugin declares: its executable run inside the run's sandbox in tool mode. */
export function pluginTool(name: string, executable: string): Tool {
  return {
    name,
    binary: executable,
    dryRunChangeFree: false,
    installed: 'plugin',
    pluginExecutable: executable,
    invocation(spec) {
      const body = { command: spec.command ?? '', dryRun: spec.dry_run === true, extraVars: spec.extra_vars ?? {} };
      return {
        argv: [executable],
        files: { [PLUGIN_TOOL_SPEC_FILE]: JSON.stringify(body) },
        env: { CAIRN_PLUGIN_TOOL: name, CAIRN_PLUGIN_TOOL_SPEC: PLUGIN_TOOL_SPEC_FILE },
      };
    },
  };
}

async function executables(dir: string): Promise<string[]> {
  const names = (await fs.readdir(dir)).sort();
  const files: string[] = [];
  for (const name of names) {
    if (name.startsWith('.')) continue;
    const file = path.join(path.resolve(dir), name);
    const stat = await fs.stat(file).catch(() => undefined);
    if (!stat?.isFile()) continue;
    if (!(await fs.access(file, fsConstants.X_OK).then(() => true, () => false))) continue;
    files.push(file);
  }
  return files;
}

function normalize(raw: Partial<Description>): Description {
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);
  return {
    tools: Array.isArray(raw.tools) ? raw.tools.filter((t) => t && typeof t.name === 'string').map((t) => ({ name: t.name })) : [],
    notifiers: strings(raw.notifiers),
    secretSources: strings(raw.secretSources),
    dynamicSecretSources: strings(raw.dynamicSecretSources),
    aiProviders: strings(raw.aiProviders),
  };
}

/** The first name of `d` already taken in the registries, as "kind name". */
function collision(d: Description, registries: PluginRegistries): string | undefined {
  for (const t of d.tools) if (reservedToolName(t.name)) return `tool ${JSON.stringify(t.name)}`;
  for (const n of d.notifiers) if (registries.extensions.notifiers.has(n)) return `notifier ${JSON.stringify(n)}`;
  for (const s of [...d.secretSources, ...d.dynamicSecretSources]) if (registries.extensions.secretSources.has(s)) return `secret source ${JSON.stringify(s)}`;
  for (const a of d.aiProviders) if (registries.aiProviders?.has(a)) return `AI provider ${JSON.stringify(a)}`;
  const all = [...d.tools.map((t) => `tool ${t.name}`), ...d.notifiers.map((n) => `notifier ${n}`), ...[...d.secretSources, ...d.dynamicSecretSources].map((s) => `secret source ${s}`), ...d.aiProviders.map((a) => `AI provider ${a}`)];
  const dup = all.find((x, i) => all.indexOf(x) !== i);
  return dup;
}

function register(plugin: LoadedPlugin, registries: PluginRegistries): void {
  const d = plugin.description;
  for (const t of d.tools) registerTool(pluginTool(t.name, plugin.file));
  for (const n of d.notifiers) {
    registries.extensions.notifiers.register(n, { notify: (event: ExtensionRunEvent, signal) => plugin.call('Notify', { notifier: n, event }, signal).then(() => undefined) });
  }
  for (const s of d.secretSources) {
    registries.extensions.secretSources.register(s, {
      kind: 'static',
      source: { resolve: (ref, signal) => plugin.call<{ value: string }>('ResolveSecret', { source: s, ref }, signal).then((r) => String(r.value ?? '')) },
    });
  }
  for (const s of d.dynamicSecretSources) {
    registries.extensions.secretSources.register(s, {
      kind: 'dynamic',
      source: {
        mint: (ref, runId, signal) => plugin.call<SecretLease>('MintSecret', { source: s, ref, runId }, signal),
        revoke: (leaseId, signal) => plugin.call('RevokeLease', { source: s, leaseId }, signal).then(() => undefined),
      },
    });
  }
  for (const a of d.aiProviders) {
    registries.aiProviders?.register(a, (settings) => ({
      complete: (request) =>
        plugin
          .call<{ text: string }>('Complete', { provider: a, model: settings.model, endpoint: settings.endpoint, apiKey: settings.apiKey, system: request.system, prompt: request.prompt }, request.signal)
          .then((r) => String(r.text ?? '')),
    }));
  }
}

/**
 * Starts every plugin of `dir` in filename order and registers what each declares. Never throws
 * for a plugin: a failing one is logged and skipped. Throws only when the directory cannot be read.
 */
export async function startPluginHost(dir: string, registries: PluginRegistries, logger: HostLogger, source: NodeJS.ProcessEnv = process.env): Promise<PluginHost> {
  const files = await executables(dir);
  const plugins: LoadedPlugin[] = [];
  if (!files.length) return { plugins, stop: async () => {} };
  const cert = await makeClientCert().catch((err: Error) => {
    throw new Error(`plugins need the openssl command to make the host's TLS certificate: ${err.message}`);
  });
  const env = pluginEnvironment(source);
  const launch = async (file: string): Promise<{ proc: PluginProcess; description: Description }> => {
    const proc = new PluginProcess(file, cert, env);
    try {
      await proc.start();
      const description = normalize(await proc.call<Partial<Description>>('Describe', {}));
      return { proc, description };
    } catch (err) {
      proc.stop();
      const tail = proc.stderrTail.trim().split('\n').slice(-3).join(' | ');
      throw new Error(`${(err as Error).message}${tail ? ` (stderr: ${tail})` : ''}`);
    }
  };
  for (const file of files) {
    let started: { proc: PluginProcess; description: Description };
    try {
      started = await launch(file);
    } catch (err) {
      logger.error({ plugin: file, err: (err as Error).message }, 'plugin failed to start or describe itself; skipped');
      continue;
    }
    const taken = collision(started.description, registries);
    if (taken) {
      started.proc.stop();
      logger.warn({ plugin: file, name: taken }, `plugin ${file} skipped: it declares ${taken}, which is already registered`);
      continue;
    }
    const relaunch = async () => {
      const again = await launch(file);
      if (JSON.stringify(again.description) !== JSON.stringify(started.description)) {
        again.proc.stop();
        throw new Error('declares other names than when it was first loaded');
      }
      return again.proc;
    };
    const plugin = new LoadedPlugin(file, started.description, started.proc, relaunch, logger);
    try {
      register(plugin, registries);
    } catch (err) {
      // Only a sealed registry refuses here (names were checked above): this process serves already.
      plugin.stop();
      logger.error({ plugin: file, err: (err as Error).message }, 'plugin skipped: its seams could not be registered');
      continue;
    }
    plugins.push(plugin);
    logger.info({ plugin: file, provides: started.description }, 'plugin loaded');
  }
  return {
    plugins,
    stop: async () => {
      for (const p of plugins) p.stop();
    },
  };
}
