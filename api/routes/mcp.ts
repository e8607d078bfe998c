import Router from '@koa/router';
import type { Context } from 'koa';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { z } from 'zod';
import { DomainError, forbidden } from '../../core/errors';
import { lazy } from '../../core/lazy';
import { runView } from '../../core/runs/run-view';
import { readableRun, readerOf } from '../../services/access/access';
import { explainRun } from '../../services/ai/advice';
import { recordMutation, type AuditOrigin } from '../../services/audit/audit';
import type { ServerContext } from '../../services/context';
import { launchTemplate } from '../../services/runs/launch';
import { submitRun } from '../../services/runs/runs';
import { readableTemplate } from '../../services/runs/templates';
import { readLogBytes } from '../../store/logs';
import { listRuns } from '../../store/runs';
import { listTemplatePage } from '../../store/templates';
import type { Caller } from '../../store/tokens';
import { originOf } from '../middleware/audit-origin';
import { callerOf } from '../middleware/auth';
import { parseInput } from '../validate';
import { runRequestOf, runSubmission } from './runs';
import { describeRoute } from '../openapi/registry';

/**
 * The MCP server for agents (spec part A 4.17; docs/api.md, "MCP for agents"): the Model Context
 * Protocol over streamable HTTP at `/mcp`, stateless (each POST is answered on its own), with the
 * official SDK. Only agent tokens are let in. The tools read what the token may read and submit
 * what it may submit, through the same services as the HTTP API: a submission is judged by the
 * gate before the tool answers (an agent's run is held unless a person's exempt policy lets it
 * past). There is no tool to approve, reject or manage accounts. Every tool call is an audit
 * chain entry (`mcp.<tool>`) naming the agent.
 */

export const MCP_PATH = '/mcp';

const str = (field: string) => ({ type: 'string', description: field });

const TOOLS = [
  {
    name: 'list_templates',
    description: 'List the job templates this token may read.',
    inputSchema: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 200 } } },
  },
  {
    name: 'list_runs',
    description: 'List the newest runs this token may read, optionally by status (held, pending, running, succeeded, failed, ...).',
    inputSchema: { type: 'object', properties: { status: str('run status'), limit: { type: 'integer', minimum: 1, maximum: 200 } } },
  },
  {
    name: 'get_run',
    description: 'Read one run: its status, exit code and hold.',
    inputSchema: { type: 'object', properties: { run_id: str('run id') }, required: ['run_id'] },
  },
  {
    name: 'read_log',
    description: "Read the end of a run's log (masked as stored).",
    inputSchema: { type: 'object', properties: { run_id: str('run id'), tail_bytes: { type: 'integer', minimum: 1, maximum: 1048576 } }, required: ['run_id'] },
  },
  {
    name: 'submit_run',
    description: 'Submit a run, with the fields of POST /v1/runs (tool, command, extra_vars, ...). Held for a person to approve unless a person exempted it; answers once the gate has judged it.',
    inputSchema: { type: 'object', properties: { run: { type: 'object', description: 'the POST /v1/runs body' } }, required: ['run'] },
  },
  {
    name: 'launch_template',
    description: 'Launch a job template with survey answers. Held for a person like submit_run.',
    inputSchema: { type: 'object', properties: { template_id: str('template id'), answers: { type: 'object' } }, required: ['template_id'] },
  },
  {
    name: 'explain_run',
    description: "Explain an ended run with the install's advisory AI (kept with the run).",
    inputSchema: { type: 'object', properties: { run_id: str('run id') }, required: ['run_id'] },
  },
] as const;

const args = {
  list_templates: z.strictObject({ limit: z.number().int().min(1).max(200).default(50) }),
  list_runs: z.strictObject({ status: z.string().max(32).optional(), limit: z.number().int().min(1).max(200).default(50) }),
  get_run: z.strictObject({ run_id: z.string().min(1).max(200) }),
  read_log: z.strictObject({ run_id: z.string().min(1).max(200), tail_bytes: z.number().int().min(1).max(1048576).default(65536) }),
  submit_run: z.strictObject({ run: z.unknown() }),
  launch_template: z.strictObject({ template_id: z.string().min(1).max(200), answers: z.record(z.string(), z.unknown()).optional() }),
  explain_run: z.strictObject({ run_id: z.string().min(1).max(200) }),
};
type ToolName = keyof typeof args;

function requireOperator(caller: Caller, tool: string): void {
  if (caller.account.role === 'viewer') throw forbidden(`${tool} needs an operator or admin account; this agent's account is a viewer`);
}

async function callTool(server: ServerContext, caller: Caller, origin: AuditOrigin, name: ToolName, raw: unknown): Promise<unknown> {
  const input = parseInput(args[name] as z.ZodType, raw ?? {}) as any;
  const readerId = readerOf(caller);
  switch (name) {
    case 'list_templates': {
      const page = await listTemplatePage(server.sql, { limit: input.limit, offset: 0 }, readerId);
      return { total: page.total, templates: page.rows.map((t) => ({ id: t.id, name: t.name, tool: t.tool, description: (t as any).description ?? null })) };
    }
    case 'list_runs': {
      const { rows, total } = await listRuns(server.sql, { limit: input.limit, offset: 0, order: 'desc', status: input.status, readerId });
      return { total, runs: rows.map((r) => runView(r, 'preview')) };
    }
    case 'get_run':
      return runView(await readableRun(server.sql, caller, input.run_id));
    case 'read_log': {
      const run = await readableRun(server.sql, caller, input.run_id);
      const from = Math.max(0, run.log_bytes - input.tail_bytes);
      return { run_id: run.id, status: run.status, from, log: (await readLogBytes(server.sql, run.id, from, input.tail_bytes)).toString('utf8') };
    }
    case 'submit_run': {
      requireOperator(caller, name);
      const submission = parseInput(runSubmission, input.run);
      const { run } = await submitRun(server, caller, origin, runRequestOf(submission));
      return runView(run);
    }
    case 'launch_template': {
      requireOperator(caller, name);
      const template = await readableTemplate(server.sql, caller, input.template_id);
      const { run } = await launchTemplate(server, caller, origin, template, { answers: input.answers });
      return runView(run);
    }
    case 'explain_run': {
      const { explanation } = await explainRun(server, caller, origin, input.run_id);
      return { run_id: explanation.run_id, answer: explanation.answer, provider: explanation.provider, model: explanation.model };
    }
  }
}

/**
 * The MCP SDK, loaded on the first MCP request. `require`, not `import()`: in this CommonJS
 * project `import()` would load the SDK's ES module build, a second copy beside the CommonJS one.
 */
const mcpSdk = lazy(() => ({
  ...(require('@modelcontextprotocol/sdk/server/index.js') as typeof import('@modelcontextprotocol/sdk/server/index.js')),
  ...(require('@modelcontextprotocol/sdk/server/streamableHttp.js') as typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js')),
  ...(require('@modelcontextprotocol/sdk/types.js') as typeof import('@modelcontextprotocol/sdk/types.js')),
}));

function mcpServer(server: ServerContext, caller: Caller, origin: AuditOrigin): Server {
  const { Server, CallToolRequestSchema, ListToolsRequestSchema } = mcpSdk();
  const mcp = new Server({ name: 'cairn', version: '1.0.0' }, { capabilities: { tools: {} } });
  mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS.map((t) => ({ ...t, inputSchema: { ...t.inputSchema } })) as any }));
  mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    let outcome: unknown;
    let status = 200;
    let error: string | undefined;
    if (!(name in args)) {
      status = 404;
      error = `no tool ${JSON.stringify(name)}: an agent never approves or rejects runs and never manages accounts; the tools are ${Object.keys(args).join(', ')}`;
    } else {
      try {
        outcome = await callTool(server, caller, { ...origin, withheld: new Set(origin.withheld) }, name as ToolName, request.params.arguments);
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        error = err.message;
        status = err.code === 'forbidden' ? 403 : err.code === 'not_found' ? 404 : 400;
      }
    }
    await recordMutation(server.sql, { ...origin, withheld: new Set(origin.withheld) }, status, async (_tx, entry) => {
      entry.body = { kind: `mcp.${name.slice(0, 64)}`, tool: name.slice(0, 64), ...(error ? { refused: error.slice(0, 300) } : {}) };
    });
    if (error) return { isError: true, content: [{ type: 'text', text: error }] };
    return { content: [{ type: 'text', text: JSON.stringify(outcome) }], structuredContent: outcome as Record<string, unknown> };
  });
  return mcp;
}

/** The calling agent; a person's token is refused. */
function mcpCaller(ctx: Context) {
  const caller = callerOf(ctx);
  if (caller.token.kind !== 'agent') throw forbidden('the MCP server is for agent tokens: mint one with POST /v1/tokens {"kind": "agent"}; people use the HTTP API');
  return caller;
}

export function mcpRoutes(server: ServerContext): Router {
  const router = new Router();
  // Stateless streamable HTTP: no session to stream on (GET) or end (DELETE), as the transport allows.
  for (const method of ['get', 'delete'] as const) {
    describeRoute({ method, path: MCP_PATH, summary: 'Not served: the MCP server is stateless (405)', role: 'viewer', errors: [405] });
    router[method](MCP_PATH, (ctx) => {
      mcpCaller(ctx);
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = { error: 'the MCP server is stateless: send each message with POST' };
    });
  }
  describeRoute({ method: 'post', path: MCP_PATH, summary: 'The Model Context Protocol for agents (JSON-RPC over streamable HTTP; agent tokens only)', role: 'viewer', errors: [403] });
  router.post(MCP_PATH, async (ctx) => {
    const caller = mcpCaller(ctx);
    const origin = originOf(ctx);
    const mcp = mcpServer(server, caller, origin);
    const { StreamableHTTPServerTransport } = mcpSdk();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    ctx.res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    ctx.respond = false;
    await transport.handleRequest(ctx.req, ctx.res, ctx.request.body);
  });
  return router;
}
