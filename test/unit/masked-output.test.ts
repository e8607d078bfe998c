import { MaskedOutput } from '../../runtime/masked-output';
import { createMasker } from '../../core/masker';

function collector() {
  const parts: string[] = [];
  const output = new MaskedOutput(createMasker(['s3cr3t-value']), (data) => parts.push(data.toString()));
  return { output, text: () => parts.join(''), parts };
}

test('a secret split across two chunks is still masked', () => {
  const { output, text } = collector();
  output.write(Buffer.from('connecting with password=hun'));
  output.write(Buffer.from('ter2 now\nnext s3cr3t-'));
  output.write(Buffer.from('value line\n'));
  output.end();
  expect(text()).toBe('connecting with password=[masked] now\nnext [masked] line\n');
});

test('a private key block arriving line by line is held until its END line and masked whole', () => {
  const { output, text } = collector();
  output.write(Buffer.from('before\n-----BEGIN OPENSSH PRIVATE KEY-----\n'));
  output.write(Buffer.from('b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n'));
  output.write(Buffer.from('-----END OPENSSH PRIVATE KEY-----\nafter\n'));
  output.end();
  expect(text()).not.toMatch(/b3BlbnNzaC1rZXkt/);
  expect(text()).toMatch(/^before\n.*\[masked\].*\nafter\n$/s);
});

test('a multi-byte character split across chunks arrives intact', () => {
  const { output, text } = collector();
  const bytes = Buffer.from('héllo\n');
  output.write(bytes.subarray(0, 2));
  output.write(bytes.subarray(2));
  output.end();
  expect(text()).toBe('héllo\n');
});

test('a prompt without a newline is passed on after a moment', async () => {
  const { output, text } = collector();
  output.write(Buffer.from('Continue? '));
  expect(text()).toBe('');
  await new Promise((r) => setTimeout(r, 700));
  expect(text()).toBe('Continue? ');
  output.end();
});

describe('pauses longer than the partial-line delay', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('an AWS key id interrupted by a pause is still masked', () => {
    const { output, text } = collector();
    output.write(Buffer.from('Using access key AKIA'));
    jest.advanceTimersByTime(2000);
    expect(text()).toBe('Using access key ');
    output.write(Buffer.from('IOSFODNN7EXAMPLE for us-east-1\n'));
    output.end();
    expect(text()).toBe('Using access key [masked] for us-east-1\n');
  });

  test('a private key block interrupted by a pause is masked through its END line', () => {
    const { output, text } = collector();
    output.write(Buffer.from('before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAA'));
    jest.advanceTimersByTime(2000);
    output.write(Buffer.from('AAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDmXbM3iQyOQ0FJ8XnQ2Yk9yq4oPcbkNsA8Ye2Xq0m3kQAAAJgm2lVTJtpV\n'));
    jest.advanceTimersByTime(2000);
    output.write(Buffer.from('-----END OPENSSH PRIVATE KEY-----\nafter\n'));
    output.end();
    expect(text()).not.toMatch(/b3BlbnNzaC1rZXkt|AAAAAABAAAAMw|QyNTUxOQ/);
    expect(text()).toBe('before\n[masked]\nafter\n');
  });

  test('a password prompt shows after the delay and the answer echoed later is masked', () => {
    const { output, text } = collector();
    output.write(Buffer.from('Password: '));
    jest.advanceTimersByTime(600);
    expect(text()).toBe('Password: ');
    output.write(Buffer.from('hunter2\nok\n'));
    output.end();
    expect(text()).toBe('Password: [masked]\nok\n');
  });
});
