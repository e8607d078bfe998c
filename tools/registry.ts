import { promises as fs, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { badRequest } from '../core/errors';
import { ansibleTool } from './ansible';
import { bashTool } from './bash';
import { pythonTool } from './python';
import { goTool, opentofuTool, powershellTool, terraformTool } from './iac';
import type { Tool } from './types';

/** Every tool name the service defines; those without a module here are not yet served by Cairn. */
export const SPEC_TOOLS = ['ansible', 'bash', 'terraform', 'opentofu', 'python', 'powershell', 'go'] as const;

/**
 * The one tool registry (spec part A 1.3): Cairn's built-in tools, then compiled-in extensions
 * and plugins (runtime/plugins.ts) registered while the process starts, sealed before it serves.
 */
const TOOLS = new Map<string, Tool>([ansibleTool, bashTool, pythonTool, terraformTool, opentofuTool, goTool, powershellTool].map((t) => [t.name, t]));
let toolsSealed = false;

/** Names no extension may take: every tool the service defines, served here or not. */
export function reservedToolName(name: string): boolean {
  return (SPEC_TOOLS as readonly string[]).includes(name) || TOOLS.has(name);
}

/** Adds an extension's tool; refused after the seal, for an empty name, or a name taken. */
export function registerTool(tool: Tool): void {
  if (toolsSealed) throw new Error(`tool ${JSON.stringify(tool.name)} registered after startup`);
  if (!tool.name.trim() || tool.name !== tool.name.trim()) throw new Error('a tool needs a name');
  if (reservedToolName(tool.name)) throw new Error(`tool ${JSON.stringify(tool.name)} is already registered`);
  if (tool.dryRunChangeFree) throw new Error(`extension tool ${JSON.stringify(tool.name)} cannot claim change-free dry runs`);
  TOOLS.set(tool.name, tool);
}

export function sealTools(): void {
  toolsSealed = true;
}

export function getTool(name: string): Tool | undefined {
  return TOOLS.get(name);
}

const binaryCache = new Map<string, { found: boolean; checkedAt: number }>();
const BINARY_RECHECK_MS = 60_000;

/**
 * The PATH a tool runs with: in a sandbox, the system directories and those of the server's PATH
 * the sandbox can see. Set once at start (runtime/sandbox-setup.ts); until then, the server's own.
 */
let toolSearchPath: string | undefined;

export function configureToolSearchPath(searchPath: string): void {
  toolSearchPath = searchPath;
  binaryCache.clear();
}

/** The PATH a tool process runs with. */
export function toolPath(): string {
  return toolSearchPath ?? serverPath();
}

const serverPath = () => process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';

async function binaryOnPath(binary: string, searchPath: string): Promise<boolean> {
  const key = `${searchPath}\u0000${binary}`;
  const cached = binaryCache.get(key);
  if (cached && Date.now() - cached.checkedAt < BINARY_RECHECK_MS) return cached.found;
  let found = false;
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue;
    try {
      await fs.access(path.join(dir, binary), fsConstants.X_OK);
      found = true;
      break;
    } catch {
      /* not in this directory */
    }
  }
  binaryCache.set(key, { found, checkedAt: Date.now() });
  return found;
}

/** The tool for a submission, or a 400 that says whether the name is unknown or the tool is missing here. */
export async function requireRunnableTool(name: string): Promise<Tool> {
  const tool = TOOLS.get(name);
  if (!tool) {
    if ((SPEC_TOOLS as readonly string[]).includes(name)) {
      throw badRequest(`the ${name} tool is not available on this server`, { field: 'tool' });
    }
    throw badRequest(`unknown tool "${name}"; this server runs: ${[...TOOLS.keys()].join(', ')}`, { field: 'tool' });
  }
  // Built into the machine cache on first use and handed to the sandbox by the worker (services/runs/runs.ts checks it can be had).
  if (tool.installed === 'built' || tool.installed === 'plugin') return tool;
  // On the server's PATH (what its operator installed for runs), and where a sandboxed tool finds it.
  if (!(await binaryOnPath(tool.binary, serverPath()))) {
    throw badRequest(`the ${name} tool is missing on this server: ${tool.binary} is not on its PATH`, { field: 'tool' });
  }
  if (!(await binaryOnPath(tool.binary, toolPath()))) {
    throw badRequest(
      `the ${name} tool is missing where runs can see it: ${tool.binary} is on this server's PATH but not in the system directories a sandboxed tool sees (${toolPath()}); install it system-wide`,
      { field: 'tool' },
    );
  }
  return tool;
}
