import type { Masker } from '../core/masker';
import { StreamMasker } from '../core/stream-masker';

/** How long output must pause before held text is passed on as far as it safely can be, so prompts show live. */
const PARTIAL_LINE_MS = 500;

/**
 * Masks a tool's output on its way to the log. The masking itself, which never passes on text
 * that what follows could make part of a secret, is the stream masker's; this adds the bytes to
 * text decoding and the pause timer.
 */
export class MaskedOutput {
  private readonly stream: StreamMasker;
  private readonly decoder = new TextDecoder('utf-8');
  private timer: NodeJS.Timeout | undefined;

  /**
   * `emit` may return a promise (the log sink's backpressure, runtime/log-sink.ts): then
   * {@link write} returns it, so the writer holds further output until it resolves.
   */
  constructor(
    masker: Masker,
    private readonly emit: (data: Buffer) => unknown,
  ) {
    this.stream = new StreamMasker(masker);
  }

  /** Takes a chunk of the tool's output; returns a promise when what it passed on asks the writer to wait. */
  write(chunk: Buffer): Promise<void> | undefined {
    clearTimeout(this.timer);
    this.timer = undefined;
    const wait = this.pass(this.stream.push(this.decoder.decode(chunk, { stream: true })));
    if (this.stream.holding) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.pass(this.stream.release());
      }, PARTIAL_LINE_MS);
    }
    return wait;
  }

  /** Passes on everything still held; call when the tool has exited. */
  end(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    void this.pass(this.stream.push(this.decoder.decode()) + this.stream.end());
  }

  private pass(text: string): Promise<void> | undefined {
    if (!text) return undefined;
    const wait = this.emit(Buffer.from(text));
    return wait instanceof Promise ? (wait as Promise<void>) : undefined;
  }
}
