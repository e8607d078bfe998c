import { MaskedOutput } from '../../activities/masked-output';
import { createMasker } from '../../core/masker';

function collector() {
  const parts: string[] = [];
  const output = new MaskedOutput(createMasker(['s3cr3t-value']).mask, (data) => parts.push(data.toString()));
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
