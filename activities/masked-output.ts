/** How long a line without its newline waits before it is passed on, so prompts still show live. */
const PARTIAL_LINE_MS = 500;
/** Held text never grows past this: beyond it, it is masked and passed on as it stands. */
const MAX_HELD_BYTES = 64 * 1024;
const PRIVATE_KEY_BEGIN = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/g;
const PRIVATE_KEY_END = /-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/;

/**
 * Masks a tool's output on its way to the log. Output arrives in arbitrary chunks, so a secret
 * could straddle two of them: text is passed on in whole lines, and a private key block is held
 * until its END line, so the masker always sees a secret whole.
 */
export class MaskedOutput {
  private held = '';
  private timer: NodeJS.Timeout | undefined;
  private readonly decoder = new TextDecoder('utf-8');

  constructor(
    private readonly mask: (text: string) => string,
    private readonly emit: (data: Buffer) => void,
  ) {}

  write(chunk: Buffer): void {
    this.held += this.decoder.decode(chunk, { stream: true });
    clearTimeout(this.timer);
    this.timer = undefined;
    const cut = this.safeCut();
    if (cut > 0) this.pass(cut);
    if (this.held) this.timer = setTimeout(() => this.pass(this.held.length), PARTIAL_LINE_MS);
  }

  /** Passes on everything still held; call when the tool has exited. */
  end(): void {
    clearTimeout(this.timer);
    this.held += this.decoder.decode();
    this.pass(this.held.length);
  }

  /** How much of the held text can be masked and passed on now. */
  private safeCut(): number {
    if (Buffer.byteLength(this.held) > MAX_HELD_BYTES) return this.held.length;
    let cut = this.held.lastIndexOf('\n') + 1;
    // An open private key block waits for its END line.
    for (const begin of this.held.matchAll(PRIVATE_KEY_BEGIN)) {
      if (begin.index < cut && !PRIVATE_KEY_END.test(this.held.slice(begin.index))) {
        cut = begin.index;
        break;
      }
    }
    return cut;
  }

  private pass(length: number): void {
    if (length === 0) return;
    const text = this.held.slice(0, length);
    this.held = this.held.slice(length);
    this.emit(Buffer.from(this.mask(text)));
  }
}
