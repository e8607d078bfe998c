import { TestWorkflowEnvironment } from '@temporalio/testing';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEV_SERVER_TUNING } from '../../embedded/temporal';
import { findTemporalCli } from '../../embedded/temporal-binary';
import pino from 'pino';
import { ensureSearchAttributes } from '../../cli/temporal-connection';
import { prepareTemplateDatabase } from './database';
import { startTsScript, type ChildHandle } from './processes';

declare global {
  var __cairnTestEnv: TestWorkflowEnvironment | undefined;
  var __cairnTestPostgres: ChildHandle | undefined;
}

/**
 * One Temporal dev server (the same CLI binary `serve` uses) and one PostgreSQL for the whole run:
 * the machine's through DATABASE_URL when set, else an embedded one (started without fsync: a
 * throwaway cluster). Each test server then takes its own database, copied from a template
 * migrated once here, and its own task queue, so tests never see each other's runs and run side by
 * side in jest's workers.
 */
export default async function globalSetup(): Promise<void> {
  const cli = await findTemporalCli((line) => process.stderr.write(`${line}\n`));
  process.env.TEMPORAL_CLI = cli;
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: cli },
      ip: '127.0.0.1',
      extraArgs: DEV_SERVER_TUNING.flatMap((value) => ['--dynamic-config-value', value]),
    },
  });
  globalThis.__cairnTestEnv = env;
  // Servers register them at start too; done once here for tests whose workers start workflows directly.
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default', pino({ level: 'silent' }));
  process.env.CAIRN_TEST_TEMPORAL_ADDRESS = env.address;

  if (process.env.DATABASE_URL) {
    process.env.CAIRN_TEST_DATABASE_URL = process.env.DATABASE_URL;
  } else {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cairn-test-pg-'));
    const pg = startTsScript('test/support/postgres-process.ts', [dir]);
    globalThis.__cairnTestPostgres = pg;
    const [, url] = await pg.waitFor(/postgres url: (\S+)/, 120_000);
    process.env.CAIRN_TEST_DATABASE_URL = url;
  }
  process.env.CAIRN_TEST_TEMPLATE_DATABASE = await prepareTemplateDatabase(process.env.CAIRN_TEST_DATABASE_URL);
}
