import { cpuTimed } from '../support/cpu-time';
import { createMasker, MASK } from '../../core/masker';

const M = MASK;
const masker = createMasker();

// Fixtures are shaped like the real thing but are not live credentials.
const RSA_KEY = [
  '-----BEGIN RSA PRIVATE KEY-----',
  'MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun',
  'VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK',
  '-----END RSA PRIVATE KEY-----',
].join('\n');
const OPENSSH_KEY = [
  '-----BEGIN OPENSSH PRIVATE KEY-----',
  'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW',
  'QyNTUxOQAAACDmXbM3iQyOQ0FJ8XnQ2Yk9yq4oPcbkNsA8Ye2Xq0m3kQAAAJgm2lVTJtpV',
  '-----END OPENSSH PRIVATE KEY-----',
].join('\n');
const EC_KEY = [
  '-----BEGIN EC PRIVATE KEY-----',
  'MHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49',
  '-----END EC PRIVATE KEY-----',
].join('\n');
const ENCRYPTED_KEY = [
  '-----BEGIN ENCRYPTED PRIVATE KEY-----',
  'MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIkq8j2o7X1DcCAggA',
  '-----END ENCRYPTED PRIVATE KEY-----',
].join('\n');
const PUBLIC_KEY = [
  '-----BEGIN PUBLIC KEY-----',
  'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9',
  '-----END PUBLIC KEY-----',
].join('\n');
const CERTIFICATE = [
  '-----BEGIN CERTIFICATE-----',
  'MIIBszCCAVmgAwIBAgIUQm8hMx0Y0eI3ZQ4V1W1sM0h1u5swCgYIKoZIzj0EAwIw',
  '-----END CERTIFICATE-----',
].join('\n');
const JWT =
  'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.' +
  'eyJzdWIiOiJyZXBvOmFjbWUvaW5mcmE6cmVmOnJlZnMvaGVhZHMvbWFpbiIsImF1ZCI6InN0cy5hbWF6b25hd3MuY29tIn0.' +
  'EAxZn8btoRPk3uaFKevcVF4lq57__ZoNY0LU6q7DnvE';

const MASKED: Array<[string, string, string]> = [
  // Private key blocks: the whole block goes, the text around it stays.
  ['RSA private key block', `key:\n${RSA_KEY}\ndone`, `key:\n${M}\ndone`],
  ['OPENSSH private key block', `${OPENSSH_KEY}\n`, `${M}\n`],
  ['EC private key block', `before ${EC_KEY} after`, `before ${M} after`],
  ['encrypted PKCS#8 key block', ENCRYPTED_KEY, M],
  ['PKCS#8 key inside a JSON service account file', '{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n","client_email":"ci@acme.iam.gserviceaccount.com"}', `{"type":"service_account","private_key":"${M}","client_email":"ci@acme.iam.gserviceaccount.com"}`],
  ['truncated key block without an END line', '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n\nTASK [deploy] ***', `${M}\n\nTASK [deploy] ***`],

  // Cloud, forge and chat tokens recognised by their prefix.
  ['AWS access key id', 'Using access key AKIAIOSFODNN7EXAMPLE for us-east-1', `Using access key ${M} for us-east-1`],
  ['AWS temporary access key id', '"AccessKeyId": "ASIAQ3EGUJ5W2KXN7RZB"', `"AccessKeyId": "${M}"`],
  ['AWS secret access key assigned', 'aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', `aws_secret_access_key = ${M}`],
  ['AWS secret access key in STS JSON', '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Expiration": "2025-01-01T00:00:00Z"}', `{"SecretAccessKey": "${M}", "Expiration": "2025-01-01T00:00:00Z"}`],
  ['AWS session token in the environment', 'export AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJHMEUCIQ', `export AWS_SESSION_TOKEN=${M}`],
  ['GitHub classic token', 'GITHUB_TOKEN is ghp_R8kT2mVq9XwLp4ZsN7bYc1HdF6gJe3Ua0iOy.', `GITHUB_TOKEN is ${M}.`],
  ['GitHub OAuth token', 'token gho_R8kT2mVq9XwLp4ZsN7bYc1HdF6gJe3Ua0iOy expired', `token ${M} expired`],
  ['GitHub app token inside a clone URL', 'git clone https://x-access-token:ghs_R8kT2mVq9XwLp4ZsN7bYc1HdF6gJe3Ua0iOy@github.com/acme/infra.git', `git clone https://x-access-token:${M}@github.com/acme/infra.git`],
  ['GitHub fine-grained token', 'pat=github_pat_11ABCDEFG0aBcDeFgHiJkL_MnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRs', `pat=${M}`],
  ['GitLab personal access token', 'CI used glpat-xY7kLm2NpQ4rSt6VwZ8a to push', `CI used ${M} to push`],
  ['Slack bot token', 'slack: xoxb-1234567890-9876543210-AbCdEfGhIjKlMnOpQrStUvWx', `slack: ${M}`],
  ['Slack user token', '(xoxp-1234567890-1234567890-1234567890-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d)', `(${M})`],
  ['Slack webhook URL', 'POST https://hooks.slack.com/services/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', `POST https://hooks.slack.com/services/${M}`],
  ['Google API key', 'maps key AIzaSyD-3kLm9Np2QrSt5VwXyZ0aBcDeFgHiJkL in use', `maps key ${M} in use`],
  ['Cairn bearer secret', 'cairn token create printed cairn_LOOMBO9DuZB8rkSafdiuTBRtNSKOKnqyRbjdC8Uh3j0', `cairn token create printed ${M}`],
  ['signed JWT', `id_token: ${JWT}`, `id_token: ${M}`],

  // HTTP credentials.
  ['Authorization Bearer header', 'Authorization: Bearer 7f3a9c2e4b1d8f6a0e5c3b9d2a7f4e1c', `Authorization: Bearer ${M}`],
  ['short token in an Authorization header', 'authorization: bearer abc123', `authorization: bearer ${M}`],
  ['Bearer token on a curl line', 'curl -H "Bearer qmfpTpEYfHDh4OIwGPqWCZGx5D1C922hEmGV0lMt" https://api.acme.io', `curl -H "Bearer ${M}" https://api.acme.io`],
  ['Basic auth header', 'curl -H "Authorization: Basic ZGVwbG95OmNvcnJlY3QtaG9yc2U=" https://repo.acme.io', `curl -H "Authorization: Basic ${M}" https://repo.acme.io`],
  ['Authorization in a JSON header map', '{"headers":{"Authorization":"token 0123456789abcdef"}}', `{"headers":{"Authorization":"token ${M}"}}`],

  // Assignments: the value goes, the key stays.
  ['password= assignment', 'db login password=hunter2 user=app', `db login password=${M} user=app`],
  ['ini-style password = value', '[db]\npassword = hunter2\nport = 5432', `[db]\npassword = ${M}\nport = 5432`],
  ['passwd: assignment', 'passwd: correcthorse', `passwd: ${M}`],
  ['secret= assignment', 'SECRET=s3cr3t-v4lue ./deploy.sh', `SECRET=${M} ./deploy.sh`],
  ['api_key= assignment', 'api_key=9f8e7d6c5b4a', `api_key=${M}`],
  ['token= in a query string', 'GET /callback?state=xyz&token=Zm9vYmFyYmF6&next=/runs', `GET /callback?state=xyz&token=${M}&next=/runs`],
  ['PGPASSWORD with single quotes', "PGPASSWORD='p@ss w0rd' psql -h db", `PGPASSWORD='${M}' psql -h db`],
  ['JSON password field', '{"username":"app","password":"Tr0ub4dor&3","port":5432}', `{"username":"app","password":"${M}","port":5432}`],
  ['YAML db_password with a comment', 'db_password: hunter2  # rotated monthly', `db_password: ${M}  # rotated monthly`],
  ['client_secret in Python repr', "{'client_id': 'cairn', 'client_secret': 'q1w2e3r4t5'}", `{'client_id': 'cairn', 'client_secret': '${M}'}`],
  ['X-API-Key header', 'X-API-Key: 5f4dcc3b5aa765d61d8327deb882cf99', `X-API-Key: ${M}`],
  ['ADO.NET connection string', 'Server=db;Database=cairn;User Id=app;Password=Hunter2!;', `Server=db;Database=cairn;User Id=app;Password=${M};`],
  ['libpq keyword string', 'host=db dbname=cairn user=app password=hunter2 sslmode=require', `host=db dbname=cairn user=app password=${M} sslmode=require`],
  ['Azure storage account key', 'AccountName=acme;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq==;', `AccountName=acme;AccountKey=${M};`],
  ['password flag on a command line', 'mysql --user app --password hunter2 cairn', `mysql --user app --password ${M} cairn`],
  ['a secret name behind an innocent one', 'docker run --env=DB_PASSWORD=hunter2 app', `docker run --env=DB_PASSWORD=${M} app`],
  ['DB_PASSWORD in an env listing', 'PWD=/srv/app\nDB_PASSWORD=hunter2\nHOME=/root', `PWD=/srv/app\nDB_PASSWORD=${M}\nHOME=/root`],
  ['PGPASSWORD exported', 'export PGPASSWORD=hunter2', `export PGPASSWORD=${M}`],
  ['passwd= assignment', 'passwd=correcthorse', `passwd=${M}`],
  ['an ODBC connection string PWD', 'Driver={PostgreSQL};Server=db;UID=app;PWD=hunter2;', `Driver={PostgreSQL};Server=db;UID=app;PWD=${M};`],
  ['a db_pwd setting, even one that looks like a path', 'db_pwd=/hunter2', `db_pwd=${M}`],
  ['escaped JSON inside a JSON string', '"{\\"password\\":\\"hunter2\\"}"', `"{\\"password\\":\\"${M}\\"}"`],

  // Credentials inside URLs and connection strings.
  ['postgres URL', 'DATABASE_URL=postgres://app:hunter2@db.internal:5432/cairn', `DATABASE_URL=postgres://app:${M}@db.internal:5432/cairn`],
  ['mysql URL with @ in the password', 'mysql://root:p@ss@mysql:3306/app', `mysql://root:${M}@mysql:3306/app`],
  ['jdbc mysql URL', 'jdbc:mysql://root:toor@mysql:3306/app', `jdbc:mysql://root:${M}@mysql:3306/app`],
  ['mongodb+srv URL', 'mongodb+srv://svc:Zx9-Qw8@cluster0.abcde.mongodb.net/?retryWrites=true', `mongodb+srv://svc:${M}@cluster0.abcde.mongodb.net/?retryWrites=true`],
  ['redis URL with an empty user', 'redis://:foobared@cache:6379/0', `redis://:${M}@cache:6379/0`],
  ['amqp URL', 'amqp://guest:guest@rabbit:5672/%2f', `amqp://guest:${M}@rabbit:5672/%2f`],
  ['https URL with user and password', 'pip install -i https://deploy:s3cret@pypi.acme.io/simple pkg', `pip install -i https://deploy:${M}@pypi.acme.io/simple pkg`],
];

test.each(MASKED)('masks %s', (_name, input, expected) => {
  expect(masker.mask(input)).toBe(expected);
  expect(masker.changed(input)).toBe(true);
});

const NOT_MASKED: Array<[string, string]> = [
  ['the word password in prose', 'Approved: reset your password in settings after the rollout.'],
  ['password= with an empty value', 'password= user=app'],
  ['password with an empty quoted value', '{"password": "", "user": "app"}'],
  ['a password prompt with nothing after it', 'Enter password:\nok'],
  ['starred password', 'password=********'],
  ['Ansible template as the value', 'db_password: "{{ vault_db_password }}"'],
  ['shell variable as the value', 'psql "password=$PGPASSWORD host=db"'],
  ['a key that only mentions password', 'password_policy: strict, password_length=16'],
  ['bypass is not pass', 'bypass=1 compass: north'],
  ["the shell's working directory", 'PWD=/tmp/cairn-run-8f2k/work'],
  ["the shell's working directories in an env listing", 'OLDPWD=/home/runner\nPWD=/home/runner/app\nSHLVL=1'],
  ['a working directory in quotes', 'PWD="/srv/my app"'],
  ['max_tokens is not a token', 'max_tokens=512 token_type=bearer'],
  ['Bearer in prose', 'The Bearer scheme is required for all API calls.'],
  ['Bearer with a short word after it', 'Bearer tokens expire after an hour'],
  ['URL with a user and no password', 'git clone https://deploy@git.acme.io/infra.git'],
  ['URL with a host and port', 'https://cairn.acme.io:8443/v1/runs?after=10'],
  ['URL with an empty password', 'ftp://anonymous:@ftp.acme.io/pub'],
  ['scp-style git remote', 'git@github.com:acme/infra.git'],
  ['an upper-case 20 character word', 'CONFIGURATIONMANAGER restarted'],
  ['AKIA with too few characters', 'AKIAIOSFODNN7EXAMPL'],
  ['AKIA inside a longer word', 'AKIAIOSFODNN7EXAMPLEXYZ'],
  ['a git commit sha', 'HEAD is now at 3f2c9d8e1a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d Fix deploy'],
  ['a UUID', 'template 123e4567-e89b-12d3-a456-426614174000 updated'],
  ['a ULID run id', 'run_01j9x7k2m4q8r5t6v3w0y1z2ab finished in 42 s'],
  ['a sha256 digest', 'image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b4b0b822cd15d1c15b0f00a08'],
  ['a public key block', `${PUBLIC_KEY}\n`],
  ['a certificate', CERTIFICATE],
  ['an ssh public key line', 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 deploy@cairn'],
  ['a ghp_ prefix too short to be a token', 'see ghp_docs for details'],
  ['an ordinary approval reason', 'Approved after checking the rollout plan with Dana; window 02:00-03:00 UTC.'],
  ['the marker itself', `password=${M} and postgres://app:${M}@db/cairn`],
  ['markers already side by side', `${M}${M}`],
];

test.each(NOT_MASKED)('leaves %s alone', (_name, input) => {
  expect(masker.mask(input)).toBe(input);
  expect(masker.changed(input)).toBe(false);
});

describe('known secrets of the run', () => {
  const known = createMasker([
    'Vault-Token-9931',
    'p@ss.w*rd(1)+$',
    'abcdef1234',
    '1234wxyz',
    's3cr3t\n',
    'q"uote\\d',
    'a b&c=d/e',
    'abc',
    '',
  ]);

  test.each<[string, string, string]>([
    ['a secret appearing twice', 'login Vault-Token-9931 ... retry Vault-Token-9931', `login ${M} ... retry ${M}`],
    ['a secret with regex metacharacters', 'pw is p@ss.w*rd(1)+$ now', `pw is ${M} now`],
    ['regex metacharacters are not a pattern', 'pw is pXss.wwwrd(1)+$ now', 'pw is pXss.wwwrd(1)+$ now'],
    ['overlapping secrets covered whole', 'x=abcdef1234wxyz;', `x=${M};`],
    ['a secret read from a file with a trailing newline', 'value s3cr3t printed', `value ${M} printed`],
    ['a secret as it appears JSON-escaped', '{"v":"q\\"uote\\\\d"}', `{"v":"${M}"}`],
    ['a secret as it appears percent-encoded', 'GET /x?k=a%20b%26c%3Dd%2Fe', `GET /x?k=${M}`],
    ['a secret glued to other text', 'prefixVault-Token-9931suffix', `prefix${M}suffix`],
  ])('masks %s', (_name, input, expected) => {
    expect(known.mask(input)).toBe(expected);
  });

  test('a known secret shorter than 4 characters is ignored', () => {
    expect(known.mask('abc def abc')).toBe('abc def abc');
  });

  test('the empty secret is ignored', () => {
    expect(known.changed('nothing to hide')).toBe(false);
  });

  test('a secret that is part of the marker does not re-mask markers', () => {
    const odd = createMasker(['mask', 'sked]']);
    expect(odd.mask(`password=hunter2 ${M}`)).toBe(`password=${M} ${M}`);
  });
});

test.each([...MASKED.map(([name, input]) => [name, input]), ...NOT_MASKED])('masking is idempotent: %s', (_name, input) => {
  const once = masker.mask(input);
  expect(masker.mask(once)).toBe(once);
});

test('a marker giving a token its word boundary still ends masked in one call', () => {
  const known = createMasker(['Vault9931']);
  const once = known.mask('Vault9931AKIAIOSFODNN7EXAMPLE');
  expect(once).toBe(M);
  expect(known.mask(once)).toBe(once);
});

describe('speed on large logs', () => {
  const MiB = 1024 * 1024;
  const fill = (unit: string) => unit.repeat(Math.ceil(MiB / unit.length)).slice(0, MiB);
  const known = createMasker(['Vault-Token-9931', 'hunter2hunter2']);

  test.each<[string, string]>([
    [
      'a realistic log',
      fill(
        'TASK [app : render config] ****\nok: [web-01] => {"changed": false, "password": "hunter2hunter2"}\n' +
          'Connecting to postgres://app:Vault-Token-9931@db:5432/cairn as run_01j9x7k2m4q8r5t6v3w0y1z2ab\n' +
          'Authorization: Bearer 7f3a9c2e4b1d8f6a0e5c3b9d2a7f4e1c, commit 3f2c9d8e1a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d\n',
      ),
    ],
    ['one long word', 'a'.repeat(MiB)],
    ['BEGIN lines without an END', fill('-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgO\n')],
    ['keys without values', fill('password password= password: ')],
    ['a key as long as the log', `${'password'.repeat(MiB / 8)}=x`],
    ['scheme prefixes without an @', fill('x://a:b')],
    ['Bearer without a long token', fill('Bearer abc ')],
    ['chained assignments', fill('a=')],
    ['quotes never closed', `password="${'a'.repeat(MiB)}`],
    ['token prefixes without a token', fill('ghp_ eyJabcdefgh.eyJ AKIA AIza ')],
  ])('1 MiB of %s masks quickly', (_name, input) => {
    expect(cpuTimed(() => known.mask(input)).ms).toBeLessThan(2000);
  });
});

describe('what more output could still turn into a secret', () => {
  const known = createMasker(['correct horse battery staple', 'line one\nline two']);

  // [text so far, what can be passed on and forgotten (up to a word end), what can be shown if kept]
  test.each<[string, string, string]>([
    ['a finished line and half a word ', 'a finished line and half a word ', 'a finished line and half a word '],
    ['Using access key AKIA', 'Using access key ', 'Using access key '],
    ['url https://deploy:s3c', 'url ', 'url '],
    ['unlock with correct horse ', 'unlock with ', 'unlock with '],
    ['login password = ', 'login ', 'login password = '],
    ['login password ', 'login ', 'login password '],
    ['mysql --password ', 'mysql ', 'mysql --password '],
    ['curl -H "Authorization: Bearer ', 'curl -H ', 'curl -H "Authorization: Bearer '],
    ['curl -H "Authorization: Bearer 7f3a', 'curl -H ', 'curl -H "Authorization: Bearer '],
    ['login "password": "hunter tw', 'login ', 'login "password": "'],
    ['login password = hunter2', 'login ', 'login password = '],
    ['login password = hunter2 done', 'login password = hunter2 ', 'login password = hunter2 '],
    ["PGPASSWORD='p@ss w0rd' psql", "PGPASSWORD='p@ss w0rd' ", "PGPASSWORD='p@ss w0rd' "],
    ['key:\n-----BEGIN RSA PRIV', 'key:\n', 'key:\n'],
    ['key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAK ', 'key:\n', 'key:\n'],
  ])('%j', (text, settled, shown) => {
    expect(text.slice(0, known.settled(text, 'word'))).toBe(settled);
    expect(text.slice(0, known.showable(text))).toBe(shown);
  });

  test('a private key block still arriving is reported as one, from its BEGIN line', () => {
    const text = 'key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAK\n';
    expect(known.unfinished(text)[0]).toMatchObject({ kind: 'key', start: 5, bodyStart: 36 });
    expect(known.settled(text, 'line')).toBe(5);
  });

  test('whole lines wait only for a known value that runs across lines', () => {
    expect(known.settled('ok\nline one\n', 'line')).toBe(3);
    expect(known.settled('ok\nline two\n', 'line')).toBe(12);
  });

  test('a forced cut is never inside a match and prefers a delimiter', () => {
    const text = 'aaaa,AKIAIOSFODNN7EXAMPLE,bbbb';
    for (let target = 6; target < 25; target++) expect(known.forcedCut(text, target)).toBe(5);
  });

  test('the longest bounded secret covers the known values', () => {
    expect(known.longestSecret).toBeGreaterThanOrEqual('correct horse battery staple'.length);
    expect(createMasker().longestSecret).toBeGreaterThanOrEqual('cairn_'.length + 43);
  });
});
