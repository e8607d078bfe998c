import { inspect } from 'node:util';
import { BlockList, isIP } from 'node:net';
import { NOTIFICATION_KINDS, REQUIRED_FIELDS, type AttachmentEvent, type NotificationKind } from './notification-kinds';
import { holdsControlCharacters } from './http-url';

/**
 * The server's delivery settings (docs/operations.md, Notifications): the server-wide
 * `--notify-<kind>` channels and `--notify-on`, the accounts the `incident`, `sms` and `email`
 * kinds send through, and the egress rules every channel obeys. Flags and their environment
 * variables are listed in core/config.ts SETTINGS with the rest; the SMS token and SMTP password
 * are read from the environment only (a flag would show them in `ps`).
 */

const flagName = (kind: NotificationKind) => `--notify-${kind.replace('_', '-')}`;
const envName = (kind: NotificationKind) => `CAIRN_NOTIFY_${kind.toUpperCase()}`;
const settingName = (kind: NotificationKind) => `notify_${kind}` as const;

/** The settings these flags set, for core/config.ts SETTINGS. */
export const NOTIFICATION_SETTINGS = {
  ...(Object.fromEntries(
    NOTIFICATION_KINDS.map((kind) => [
      settingName(kind),
      {
        flag: flagName(kind),
        env: envName(kind),
        help: `server-wide ${kind} channel: its ${REQUIRED_FIELDS[kind].join(' and ')}${kind === 'annotation' ? ' (url only; the token is --notify-annotation-key)' : ''}`,
      },
    ]),
  ) as Record<`notify_${NotificationKind}`, { flag: string; env: string; help: string }>),
  notify_annotation_key: { flag: '--notify-annotation-key', env: 'CAIRN_NOTIFY_ANNOTATION_KEY', help: 'the token of the --notify-annotation channel' },
  notifyOn: { flag: '--notify-on', env: 'CAIRN_NOTIFY_ON', help: 'events the --notify-<kind> channels hear: started,success,failure,approval (default failure)' },
  incidentUrl: { flag: '--incident-url', env: 'CAIRN_INCIDENT_URL', help: 'events endpoint of incident targets (default https://events.pagerduty.com/v2/enqueue)' },
  smsUrl: { flag: '--sms-url', env: 'CAIRN_SMS_URL', help: 'SMS account API base (default https://api.twilio.com); token in CAIRN_SMS_TOKEN' },
  smsAccount: { flag: '--sms-account', env: 'CAIRN_SMS_ACCOUNT', help: 'SMS account id sms targets send through' },
  smsFrom: { flag: '--sms-from', env: 'CAIRN_SMS_FROM', help: 'the number SMS messages are sent from' },
  smtpUrl: { flag: '--smtp-url', env: 'CAIRN_SMTP_URL', help: 'mail transport: smtp://host:port or smtps://host:port; password in CAIRN_SMTP_PASSWORD' },
  smtpUser: { flag: '--smtp-user', env: 'CAIRN_SMTP_USER', help: 'SMTP account name' },
  smtpFrom: { flag: '--smtp-from', env: 'CAIRN_SMTP_FROM', help: 'sender address of notification mail (default cairn@<hostname of --smtp-url>)' },
} as const;

export type NotificationSettingName = keyof typeof NOTIFICATION_SETTINGS;

/** A setting that cannot be used; core/config.ts reports it naming the flag. */
export class DeliverySettingError extends Error {}

/** A server-wide channel: the kind and its destination. */
export interface ServerChannel {
  kind: NotificationKind;
  url?: string;
  key?: string;
  to?: string;
}

const NOTIFY_ON_EVENTS: readonly AttachmentEvent[] = ['started', 'success', 'failure', 'approval'];

/** Private, loopback, link-local and other non-public ranges, refused as delivery destinations (spec part B 6.2 rule 6). */
const REFUSED_RANGES: [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 3, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
];

/**
 * Which addresses deliveries may reach: every public address, and the CIDRs of
 * `SERVICE_EGRESS_ALLOW` (for receivers on a private network, and for tests on loopback).
 */
export class EgressRule {
  private readonly refused = new BlockList();
  private readonly allowed = new BlockList();

  constructor(readonly allow: readonly string[]) {
    for (const [address, prefix, family] of REFUSED_RANGES) this.refused.addSubnet(address, prefix, family);
    for (const cidr of allow) {
      const [address, prefix] = cidr.split('/');
      const family = isIP(address);
      const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix);
      if (!family || !Number.isInteger(bits) || bits < 0 || bits > (family === 6 ? 128 : 32)) {
        throw new DeliverySettingError(`SERVICE_EGRESS_ALLOW: "${cidr}" is not a CIDR (try 10.0.0.0/8 or fd00::/8)`);
      }
      this.allowed.addSubnet(address, bits, family === 6 ? 'ipv6' : 'ipv4');
    }
  }

  /** Why a resolved address may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined {
    const family = isIP(address);
    if (!family) return `${address} is not an IP address`;
    const type = family === 6 ? 'ipv6' : 'ipv4';
    // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is judged as the IPv4 address it is.
    const mapped = type === 'ipv6' ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] : undefined;
    const judged = mapped ?? address;
    const judgedType: 'ipv4' | 'ipv6' = mapped ? 'ipv4' : type;
    if (this.allowed.check(judged, judgedType)) return undefined;
    if (this.refused.check(judged, judgedType)) {
      return `${address} is a private, loopback or link-local address; deliveries go to public addresses only (SERVICE_EGRESS_ALLOW exempts ranges)`;
    }
    return undefined;
  }
}

/** Everything deliveries need to know from the server's settings. Prints as `[redacted]`: it holds channel URLs and account secrets. */
export class DeliverySettings {
  constructor(
    readonly channels: readonly ServerChannel[],
    readonly notifyOn: readonly AttachmentEvent[],
    readonly incidentUrl: string,
    readonly sms: { url: string; account?: string; from?: string; token?: string },
    readonly smtp: { url?: string; user?: string; password?: string; from?: string },
    readonly egress: EgressRule,
    readonly proxy: string | undefined,
  ) {}
  /** Every secret value these settings hold, for the output masker and the log tests. */
  secrets(): string[] {
    return [
      ...this.channels.flatMap((c) => [c.url, c.key]),
      this.sms.token,
      this.smtp.password,
    ].filter((v): v is string => !!v);
  }
  toJSON(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return 'DeliverySettings [redacted]';
  }
}

function checkedUrl(value: string, where: string, schemes: readonly string[]): string {
  // The URL parser drops CR, LF and tab silently: refused rather than sent as another address (core/http-url.ts).
  if (holdsControlCharacters(value)) throw new DeliverySettingError(`${where}: must not hold control characters (such as a line break or tab)`);
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new DeliverySettingError(`${where}: not a URL`);
  }
  if (!schemes.includes(parsed.protocol)) throw new DeliverySettingError(`${where}: expected a ${schemes.join(' or ')} URL`);
  return value;
}

/** Reads the delivery settings from the flag-or-environment values core/config.ts gathered, and the environment. */
export function deliverySettingsFrom(raw: Record<string, string | undefined>, env: NodeJS.ProcessEnv): DeliverySettings {
  const channels: ServerChannel[] = [];
  for (const kind of NOTIFICATION_KINDS) {
    const value = raw[settingName(kind)];
    if (!value) continue;
    const where = flagName(kind);
    if (kind === 'sms' || kind === 'email') channels.push({ kind, to: value });
    else if (kind === 'incident') channels.push({ kind, key: value });
    else if (kind === 'annotation') {
      const key = raw.notify_annotation_key;
      if (!key) throw new DeliverySettingError(`${where}: an annotation channel needs its token in --notify-annotation-key`);
      channels.push({ kind, url: checkedUrl(value, where, ['https:', 'http:']), key });
    } else channels.push({ kind, url: checkedUrl(value, where, ['https:', 'http:']) });
  }
  const notifyOn = (raw.notifyOn ?? 'failure').split(',').map((s) => s.trim()).filter(Boolean);
  for (const event of notifyOn) {
    if (!(NOTIFY_ON_EVENTS as readonly string[]).includes(event)) {
      throw new DeliverySettingError(`--notify-on: "${event}" is not one of ${NOTIFY_ON_EVENTS.join(', ')}`);
    }
  }
  const allow = (env.SERVICE_EGRESS_ALLOW ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const proxy = env.SERVICE_EGRESS_PROXY || undefined;
  if (proxy) checkedUrl(proxy, 'SERVICE_EGRESS_PROXY', ['http:']);
  return new DeliverySettings(
    channels,
    notifyOn as AttachmentEvent[],
    checkedUrl(raw.incidentUrl ?? 'https://events.pagerduty.com/v2/enqueue', '--incident-url', ['https:', 'http:']),
    {
      url: checkedUrl(raw.smsUrl ?? 'https://api.twilio.com', '--sms-url', ['https:', 'http:']),
      account: raw.smsAccount,
      from: raw.smsFrom,
      token: env.CAIRN_SMS_TOKEN || undefined,
    },
    {
      url: raw.smtpUrl ? checkedUrl(raw.smtpUrl, '--smtp-url', ['smtp:', 'smtps:']) : undefined,
      user: raw.smtpUser,
      password: env.CAIRN_SMTP_PASSWORD || undefined,
      from: raw.smtpFrom,
    },
    new EgressRule(allow),
    proxy,
  );
}
