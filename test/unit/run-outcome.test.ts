import { finalStateOf } from '../../core/runs/run-outcome';

test('a clean exit succeeds', () => {
  expect(finalStateOf({ kind: 'exited', exitCode: 0, signal: null }, null)).toEqual({ status: 'succeeded', error: null, exit_code: 0 });
});

test('a non-zero exit fails with the code', () => {
  expect(finalStateOf({ kind: 'exited', exitCode: 2, signal: null }, null)).toEqual({ status: 'failed', error: 'exited with code 2', exit_code: 2 });
});

test('a kill by signal fails naming the signal', () => {
  expect(finalStateOf({ kind: 'exited', exitCode: null, signal: 'SIGSEGV' }, null).error).toBe('killed by signal SIGSEGV');
});

test('a timeout fails with the reason', () => {
  expect(finalStateOf({ kind: 'timed_out', seconds: 5 }, null)).toEqual({ status: 'failed', error: 'timed out after 5 s', exit_code: null });
});

test('a cancel names who canceled', () => {
  expect(finalStateOf({ kind: 'canceled' }, 'dana')).toEqual({ status: 'canceled', error: 'canceled by dana', exit_code: null });
});

test('an execution that could not complete is interrupted', () => {
  expect(finalStateOf({ kind: 'lost', message: 'execution could not complete: boom' }, null).status).toBe('interrupted');
});

test('a run that crossed a bound fails naming the bound, its flag and its value', () => {
  expect(finalStateOf({ kind: 'bound_exceeded', bound: 'memory', flag: '--run-memory', limit: '64 MiB', exitCode: 137 }, null)).toEqual({
    status: 'failed',
    error: 'exceeded its memory bound (--run-memory 64 MiB)',
    exit_code: 137,
  });
  expect(finalStateOf({ kind: 'bound_exceeded', bound: 'process', flag: '--run-pids', limit: '32', exitCode: null }, null).error).toBe('exceeded its process bound (--run-pids 32)');
});
