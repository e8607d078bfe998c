import { MASK, privateKeyBody, type Masker, type Unfinished } from './masker';

/** Room for a private key's END line (with indent) at the end of an endless key line. */
const KEY_END_ROOM = 256;

/** Held text past this many characters is passed on at its last safe point, or else cut by force. */
export const HELD_BOUND = 64 * 1024;

/**
 * Masks text that arrives in pieces (a tool's output) and passes on only what nothing that
 * follows can make part of a secret, whatever the pieces and pauses. Pure and timer-free: the
 * caller says when output has paused ({@link release}) and when it is over ({@link end}).
 *
 * - A piece passes on up to its last line end, minus whatever could still grow into a secret
 *   there (an open private key block, the start of a known value that runs across lines), as the
 *   masker reports it ({@link Masker.settled}); line by line, so ordinary logs cost one mask.
 * - A pause passes on everything up to where a secret could still begin or be hidden
 *   ({@link Masker.showable}), so a prompt shows. Text shown ahead of an unfinished name
 *   (`Password: `) is kept and masked again in front of what follows, so the answer still meets
 *   its name; the part already passed on is left out the second time.
 * - A private key block still arriving at a pause, or longer than the bound, is masked at once
 *   and the rest of its body dropped through its END line.
 * - Held text longer than the bound is passed on at its last safe point. A single word with none
 *   (a line with no whitespace) is cut, keeping back a tail longer than any secret of bounded
 *   length and never cutting inside a match; a secret the cut ran into is dropped to the end of
 *   its word, and a name whose value is still arriving that long is masked to the value's end.
 *
 * Masking the concatenated output again changes nothing; for text without secrets the output is
 * the input, and otherwise it is what masking the whole text at once gives, except that a key
 * block or value cut by the bound may be masked a little wider.
 */
export class StreamMasker {
  /** Text not yet forgotten. Its first `shown` characters have been passed on, as `shownAs`. */
  private held = '';
  private shown = 0;
  private shownAs = '';
  /** `key`: inside a private key block; `space` and `line`: dropping a secret cut by force to its end. */
  private state: 'plain' | 'key' | 'space' | 'line' = 'plain';
  /** In a key: how much of the held text is known to be blank lines, not to be read again. */
  private keyResume = 0;
  /** What a forced cut keeps back: longer than any secret of bounded length. */
  private readonly tail: number;
  private readonly bound: number;

  constructor(
    private readonly masker: Masker,
    bound = HELD_BOUND,
  ) {
    this.tail = masker.longestSecret + 8 * 1024;
    this.bound = Math.max(bound, 4 * this.tail);
  }

  /** Takes the next piece of output and returns what can be passed on now. */
  push(text: string): string {
    if (!text) return '';
    this.held += text;
    // In plain text only a new line end lets more out, until the held text outgrows the bound.
    if (this.state === 'plain' && !text.includes('\n') && this.held.length <= this.bound) return '';
    return this.drain('push');
  }

  /** Output has paused: returns what can be passed on now, so a prompt shows. */
  release(): string {
    return this.drain('release');
  }

  /** Output is over: returns the rest, masked. */
  end(): string {
    return this.drain('end');
  }

  /** Whether text is held back (a pause may pass some of it on). */
  get holding(): boolean {
    return this.held.length > this.shown;
  }

  private drain(mode: 'push' | 'release' | 'end'): string {
    const out: string[] = [];
    for (;;) {
      if (this.state === 'key') {
        const body = privateKeyBody(this.held, mode === 'end', this.keyResume);
        this.held = this.held.slice(body.length);
        if (!body.over) {
          this.keyResume = body.resume - body.length;
          // Held key text past the bound (one endless line, endless blank lines): keep only what could still hold the END line.
          if (this.held.length > this.bound) {
            this.held = this.held.slice(-KEY_END_ROOM);
            this.keyResume = 0;
          }
          break;
        }
        this.state = 'plain';
      } else if (this.state !== 'plain') {
        const stop = this.held.search(this.state === 'space' ? /\s/ : /[\r\n]/);
        this.held = stop === -1 ? '' : this.held.slice(stop);
        if (stop === -1) break;
        this.state = 'plain';
      } else if (mode === 'end') {
        this.pass(out, this.held.length);
        break;
      } else {
        this.pass(out, this.masker.settled(this.held, mode === 'push' ? 'line' : 'word'));
        if (this.held.length > this.bound) {
          const before = this.held.length;
          this.overflow(out);
          // Cannot happen while cuts fall outside what was shown; guards the loop all the same.
          if (this.state === 'plain' && this.held.length === before) this.pass(out, before);
        } else if (mode !== 'release' || !this.pause(out)) break;
      }
    }
    return out.join('');
  }

  /** Output paused: a private key still arriving is masked from here on; otherwise shows what it can. Returns whether the state changed. */
  private pause(out: string[]): boolean {
    const first = this.masker.unfinished(this.held)[0];
    if (first?.kind === 'key') {
      this.enterKey(out, first);
      return true;
    }
    const showable = this.masker.showable(this.held);
    if (showable > this.shown) {
      const masked = this.masker.mask(this.held.slice(0, showable));
      out.push(this.notShownYet(masked));
      this.shown = showable;
      this.shownAs = masked;
    }
    return false;
  }

  /** The held text outgrew the bound: pass it on at its last safe point, or cut it by force. */
  private overflow(out: string[]): void {
    this.pass(out, this.masker.settled(this.held, 'word'));
    if (this.held.length <= this.bound / 2) return;
    const target = this.held.length - this.tail;
    // A key or value still arriving from before the target cannot wait for its end.
    const open = this.masker.unfinished(this.held).filter((unfinished) => unfinished.kind !== 'word');
    const first = open[0];
    if (first?.kind === 'key' && first.start < target) return this.enterKey(out, first);
    if (first?.kind === 'value' && first.start < target) {
      // Masked from where it is hidden to its end, unseen; its name shows.
      this.pass(out, Math.min(...open.map((unfinished) => unfinished.hiddenFrom)));
      out.push(MASK);
      this.forgetShown();
      this.state = first.until;
      return;
    }
    const cut = this.masker.forcedCut(this.held, target);
    const raw = this.held.slice(0, cut);
    // A secret reaching the cut (a token longer than the tail) goes on to the end of its word.
    if (this.pass(out, cut).endsWith(MASK) && !raw.endsWith(MASK)) this.state = 'space';
  }

  private enterKey(out: string[], key: Extract<Unfinished, { kind: 'key' }>): void {
    const before = this.held.length;
    this.pass(out, key.start);
    out.push(MASK);
    this.held = this.held.slice(key.bodyStart - (before - this.held.length));
    this.forgetShown();
    this.state = 'key';
    this.keyResume = 0;
  }

  /** Masks the first `cut` held characters, passes on what was not shown already, forgets them; returns their masking. */
  private pass(out: string[], cut: number): string {
    if (cut === 0) return '';
    const masked = this.masker.mask(this.held.slice(0, cut));
    if (cut >= this.shown) {
      out.push(this.notShownYet(masked));
      this.forgetShown();
    } else if (this.shownAs.startsWith(masked)) {
      this.shown -= cut;
      this.shownAs = this.shownAs.slice(masked.length);
    } else {
      return masked; // part of what was shown cannot be told apart: keep it all
    }
    this.held = this.held.slice(cut);
    return masked;
  }

  /** What of `masked` (the masking of held text) has not been passed on already. */
  private notShownYet(masked: string): string {
    if (masked.startsWith(this.shownAs)) return masked.slice(this.shownAs.length);
    let same = 0;
    while (same < masked.length && masked[same] === this.shownAs[same]) same++;
    return masked.slice(same);
  }

  private forgetShown(): void {
    this.shown = 0;
    this.shownAs = '';
  }
}
