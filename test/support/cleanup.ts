import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { processTreeCpuSeconds } from '../../embedded/process-cpu';
import { removeTempDirs } from './temp';

// Every test file leaves /tmp as it found it: data dirs, embedded clusters' files and all.
afterAll(removeTempDirs);

// What each file cost in CPU, for the run's summary (test/support/summary-reporter.js): the test
// lanes are bound by the machine's cores, not by the wall clock of any one file.
const cpuLog = process.env.CAIRN_TEST_CPU_LOG;
if (cpuLog) {
  const before = processTreeCpuSeconds(process.pid);
  afterAll(() => {
    const file = path.relative(process.cwd(), expect.getState().testPath ?? 'unknown');
    appendFileSync(cpuLog, `${JSON.stringify({ file, cpu: processTreeCpuSeconds(process.pid) - before })}\n`);
  });
}
