import type { RunEvent } from '../../core/runs/run';
import type { Sql } from '../../store/db';
import { readRunActivity, type RunActivitySnapshot } from '../../store/run-activity';
import type { ChannelWakeups } from '../channel-wakeups';

/** Events one read of a run's activity takes at a time. */
export const STREAM_EVENT_PAGE = 100;
/** Log bytes one read of a run's activity takes at a time. */
export const STREAM_LOG_READ_BYTES = 256 * 1024;
/**
 * Log bytes one `log` message of a stream holds at most. Made text and then JSON, a message stays
 * under V8's large-object size (128 KiB), so a firehose's messages die young in the new space;
 * messages of a whole read each went to the large-object space, where they piled up as garbage
 * until a full collection (tens of MiB of a server's memory during one busy stream).
 */
export const STREAM_LOG_MESSAGE_BYTES = 64 * 1024;
/**
 * What a run's feed keeps of what it read, for readers a little behind the newest: about this many
 * bytes for each stream reading it, up to {@link FEED_WINDOW_BYTES}. Many streams of a fast log
 * spread apart and share the feed's reads through the window; one stream is at the head or reads
 * the store itself, and what a window holds outlives the young generation's collections and is
 * garbage in the old space once it leaves: a 2 MiB window for one client following a firehose
 * grew the server's heap by about 36 MiB (`(l)`'s RSS peak 314 to 325 MiB; 289 to 293 with 256 KiB).
 */
export const FEED_WINDOW_BYTES_PER_STREAM = 256 * 1024;
/** The most a run's feed keeps of what it read. */
export const FEED_WINDOW_BYTES = 2 * 1024 * 1024;

/** What an item costs besides its bytes (its object and positions), so many tiny ones fill the window too. */
const ITEM_OVERHEAD = 200;

/** Where a reader of a run's activity stands: the last event seq and the log byte offset it has. */
export interface StreamPosition {
  after: number;
  log_offset: number;
}

/** One read of a run's activity from a position; its log is cut at a character boundary unless it holds the log's last bytes. */
export type ActivityRead = RunActivitySnapshot;

/** How many of these bytes end on a character boundary: a UTF-8 sequence cut short at the end waits for the next read. */
export function wholeCharacters(bytes: Buffer): number {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const byte = bytes[bytes.length - back];
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: its lead byte is further back
    const length = byte >= 0xf8 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return length > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}

/**
 * A read's log as the pieces its messages carry: at most STREAM_LOG_MESSAGE_BYTES each, every one
 * but the last ending on a character boundary (the last ends where the read did); none for an empty read.
 */
export function logPieces(log: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  let at = 0;
  while (log.length - at > STREAM_LOG_MESSAGE_BYTES) {
    // At least STREAM_LOG_MESSAGE_BYTES - 3 bytes: every piece moves on.
    const whole = wholeCharacters(log.subarray(at, at + STREAM_LOG_MESSAGE_BYTES));
    pieces.push(log.subarray(at, at + whole));
    at += whole;
  }
  if (at < log.length) pieces.push(log.subarray(at));
  return pieces;
}

/** The run row, its next events and a piece of its log after the position, as one snapshot saw them (store/run-activity.ts). */
export async function readActivity(sql: Sql, runId: string, at: StreamPosition): Promise<ActivityRead | undefined> {
  const read = await readRunActivity(sql, runId, { after: at.after, logOffset: at.log_offset }, { events: STREAM_EVENT_PAGE, logBytes: STREAM_LOG_READ_BYTES });
  if (!read) return undefined;
  // Text is sent in whole characters, so offsets name character boundaries; the log's last bytes go as they are.
  const final = read.finished && at.log_offset + read.log.length >= read.log_bytes;
  return final ? read : { ...read, log: read.log.subarray(0, wholeCharacters(read.log)) };
}

/** A thing a feed read: an event, or a piece of log starting at `before.log_offset`. */
export interface FeedItem {
  no: number;
  before: StreamPosition;
  after: StreamPosition;
  event?: RunEvent;
  log?: Buffer;
  /** The message a reader standing at `before` is sent for it, made once for all such readers (the caller's to fill). */
  message?: string;
  /** About what holding it costs, for the window. */
  size: number;
}

/** What a reader at a position gets next from its run's feed. */
export type FeedStep =
  /** The feed no longer holds what comes after the position: read it from the store. */
  | { kind: 'behind' }
  /** Nothing new yet. */
  | { kind: 'wait' }
  | { kind: 'item'; item: FeedItem; cursor: number }
  | { kind: 'end'; status: string; error: string | null };

/**
 * One server's single reader of one run's live activity, shared by every stream of the run that
 * server serves: it reads the run's events and log once, whatever the number of streams, and
 * keeps the last FEED_WINDOW_BYTES_PER_STREAM or so of what it read for each stream, up to
 * FEED_WINDOW_BYTES. Streams take from it at their own pace;
 * one that falls further behind than the window reads from the store on its own until it has
 * caught up, so a slow client neither holds the others back nor makes the feed hold more. The
 * feed reads only while some stream is waiting for news, so it never runs ahead of its readers.
 */
export class RunFeed {
  /** The items held are `items[skip..]`; the array is compacted now and then rather than shifted each time. */
  private items: FeedItem[] = [];
  private skip = 0;
  private firstNo = 0;
  private nextNo = 0;
  private heldBytes = 0;
  /** Position before the first item held (the head when none is). */
  private base: StreamPosition;
  private head: StreamPosition;
  private ended: { status: string; error: string | null; log_bytes: number } | undefined;
  private failed: Error | undefined;
  /** Streams waiting for news: while there is one, the feed reads. */
  private waiting = 0;
  subscribers = 0;
  private readonly stopped = new AbortController();
  private news: { promise: Promise<void>; resolve: () => void } = settleable();
  private demand: { promise: Promise<void>; resolve: () => void } = settleable();
  private reading: Promise<void> | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly hub: ChannelWakeups,
    readonly runId: string,
    start: StreamPosition,
    private readonly onFailed: (feed: RunFeed) => void,
  ) {
    this.base = { ...start };
    this.head = { ...start };
  }

  /** The next thing for a stream at `at` whose last item from this feed was `cursor - 1` (none yet: undefined). */
  next(at: StreamPosition, cursor: number | undefined): FeedStep {
    if (this.failed) throw this.failed;
    if (cursor === undefined || cursor < this.firstNo) {
      if (at.after < this.base.after || at.log_offset < this.base.log_offset) return { kind: 'behind' };
      cursor = this.firstNo;
    }
    for (; cursor < this.nextNo; cursor++) {
      const item = this.items[this.skip + cursor - this.firstNo];
      const wanted = item.event ? item.event.seq > at.after : item.after.log_offset > at.log_offset;
      if (wanted) return { kind: 'item', item, cursor: cursor + 1 };
    }
    // A stream that took every item has the whole log: the feed ended only once it had read to the end.
    if (this.ended) return { kind: 'end', status: this.ended.status, error: this.ended.error };
    return { kind: 'wait' };
  }

  /** Resolves when the feed has read something new, after `maxMs`, or when `signal` aborts; the feed reads meanwhile. */
  async waitForNews(maxMs: number, signal: AbortSignal): Promise<void> {
    if (this.ended || this.failed) return;
    this.waiting++;
    this.demand.resolve();
    this.reading ??= this.read();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await Promise.race([
        this.news.promise,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, maxMs);
          onAbort = resolve;
          signal.addEventListener('abort', onAbort);
        }),
      ]);
    } finally {
      this.waiting--;
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
  }

  /** No stream reads this feed any more. */
  stop(): void {
    this.stopped.abort();
    this.demand.resolve();
  }

  private async read(): Promise<void> {
    try {
      while (!this.stopped.signal.aborted && !this.ended) {
        if (this.waiting === 0) {
          this.demand = settleable();
          await this.demand.promise;
          continue;
        }
        const read = await readActivity(this.sql, this.runId, this.head);
        if (!read) throw new Error(`run ${this.runId} is gone`);
        let progressed = false;
        for (const event of read.events) {
          this.push({ event, size: JSON.stringify(event.body).length + ITEM_OVERHEAD }, { after: event.seq, log_offset: this.head.log_offset });
          progressed = true;
        }
        for (const log of logPieces(read.log)) {
          this.push({ log, size: log.length + ITEM_OVERHEAD }, { after: this.head.after, log_offset: this.head.log_offset + log.length });
          progressed = true;
        }
        if (progressed) this.announce();
        else if (read.finished && this.head.log_offset >= read.log_bytes) {
          this.ended = { status: read.status, error: read.error, log_bytes: read.log_bytes };
          this.announce();
        } else await this.hub.waitFor(this.runId, 1000, this.stopped.signal);
      }
    } catch (err) {
      this.failed = err as Error;
      this.onFailed(this);
      this.announce();
    }
  }

  private push(content: { event?: RunEvent; log?: Buffer; size: number }, after: StreamPosition): void {
    this.items.push({ no: this.nextNo++, before: this.head, after, ...content });
    this.head = after;
    this.heldBytes += content.size;
    // The window: the oldest items go once it is full (the newest always stays).
    const window = Math.min(FEED_WINDOW_BYTES, FEED_WINDOW_BYTES_PER_STREAM * Math.max(1, this.subscribers));
    while (this.heldBytes > window && this.items.length - this.skip > 1) {
      this.heldBytes -= this.items[this.skip].size;
      this.items[this.skip++] = undefined as never;
      this.firstNo++;
      this.base = this.items[this.skip].before;
    }
    if (this.skip > 1024 && this.skip * 2 > this.items.length) {
      this.items = this.items.slice(this.skip);
      this.skip = 0;
    }
  }

  private announce(): void {
    const news = this.news;
    this.news = settleable();
    news.resolve();
  }
}

/** Every run's feed on this server, made for a run's first stream and ended with its last. */
export class RunFeeds {
  private readonly feeds = new Map<string, RunFeed>();

  constructor(private readonly sql: Sql, private readonly hub: ChannelWakeups) {}

  /** The run's feed for a stream starting at `at`; call the function returned when the stream ends. */
  subscribe(runId: string, at: StreamPosition): { feed: RunFeed; release: () => void } {
    let feed = this.feeds.get(runId);
    if (!feed) {
      // A feed that failed is forgotten at once, so the next stream starts a fresh one.
      feed = new RunFeed(this.sql, this.hub, runId, at, (failed) => {
        if (this.feeds.get(runId) === failed) this.feeds.delete(runId);
      });
      this.feeds.set(runId, feed);
    }
    feed.subscribers++;
    const subscribed = feed;
    let released = false;
    return {
      feed,
      release: () => {
        if (released) return;
        released = true;
        if (--subscribed.subscribers > 0) return;
        subscribed.stop();
        if (this.feeds.get(runId) === subscribed) this.feeds.delete(runId);
      },
    };
  }

  /** Runs with a feed on this server now. */
  get size(): number {
    return this.feeds.size;
  }
}

function settleable(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
