import { promises as fs, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { badRequest } from '../core/errors';
import { bashTool } from './bash';
import { pythonTool } from './python';
import type { Tool } from './types';

/** Every tool name the service defines; those without a module here are not yet served by Cairn. */
export const SPEC_TOOLS = ['ansible', 'bash', 'terraform', 'opentofu', 'python', 'powershell', 'go'] as const;

const TOOLS = new Map<string, Tool>([bashTool, pythonTool].map((t) => [t.name, t]));

export function getTool(name: string): Tool | undefined {
  return TOOLS.get(name);
}

const binaryCache = new Map<string, { found: boolean; checkedAt: number }>();
const BINARY_RECHECK_MS = 60_000;

async function binaryOnPath(binary: string): Promise<boolean> {
  const cached = binaryCache.get(binary);
  if (cached && Date.now() - cached.checkedAt < BINARY_RECHECK_MS) return cached.found;
  let found = false;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    try {
      await fs.access(path.join(dir, binary), fsConstants.X_OK);
      found = true;
      break;
    } catch {
      /* not in this directory */
    }
  }
  binaryCache.set(binary, { found, checkedAt: Date.now() });
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
  if (!(await binaryOnPath(tool.binary))) {
    throw badRequest(`the ${name} tool is missing on this server: ${tool.binary} is not on its PATH`, { field: 'tool' });
  }
  return tool;
}
