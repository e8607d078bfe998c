import { BUILD_PROGRESS_EVERY_MS, withBuildProgress } from '../../embedded/temporal-binary';

// A first start that builds the Temporal CLI (minutes) says what it is doing and for how long.

afterEach(() => jest.useRealTimers());

test('each phase is shown as it begins, the phase under way every interval with the elapsed time, then the total', async () => {
  jest.useFakeTimers({ now: 0 });
  const lines: string[] = [];
  let finish!: () => void;
  const done = withBuildProgress('building the Temporal CLI v1.5.1', (line) => lines.push(line), async (onPhase) => {
    onPhase('downloading github.com/temporalio/cli@v1.5.1');
    await new Promise<void>((resolve) => (finish = resolve));
    return 'built';
  });
  jest.advanceTimersByTime(BUILD_PROGRESS_EVERY_MS);
  jest.advanceTimersByTime(BUILD_PROGRESS_EVERY_MS * 4);
  finish();
  expect(await done).toBe('built');
  expect(lines).toEqual([
    'building the Temporal CLI v1.5.1: downloading github.com/temporalio/cli@v1.5.1 (0 s elapsed)',
    'building the Temporal CLI v1.5.1: still downloading github.com/temporalio/cli@v1.5.1, 15 s elapsed',
    'building the Temporal CLI v1.5.1: still downloading github.com/temporalio/cli@v1.5.1, 30 s elapsed',
    'building the Temporal CLI v1.5.1: still downloading github.com/temporalio/cli@v1.5.1, 45 s elapsed',
    'building the Temporal CLI v1.5.1: still downloading github.com/temporalio/cli@v1.5.1, 1 min 0 s elapsed',
    'building the Temporal CLI v1.5.1: still downloading github.com/temporalio/cli@v1.5.1, 1 min 15 s elapsed',
    'building the Temporal CLI v1.5.1: done in 1 min 15 s',
  ]);
});

test('a failed build stops the progress lines', async () => {
  jest.useFakeTimers({ now: 0 });
  const lines: string[] = [];
  await expect(withBuildProgress('building X', (line) => lines.push(line), async () => Promise.reject(new Error('no Go')))).rejects.toThrow('no Go');
  jest.advanceTimersByTime(BUILD_PROGRESS_EVERY_MS * 3);
  expect(lines).toEqual([]);
});
