// Turns a tool's output with ANSI escape sequences into lines of styled segments. Colours are
// classes (console.css), never inline styles; sequences other than colours and weights are dropped.

export interface Segment {
  text: string;
  className: string;
}

interface Style {
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
  fg?: number;
  bg?: number;
}

const plain = (): Style => ({ bold: false, dim: false, italic: false, underline: false });

function classOf(style: Style): string {
  const names: string[] = [];
  if (style.bold) names.push('ansi-bold');
  if (style.dim) names.push('ansi-dim');
  if (style.italic) names.push('ansi-italic');
  if (style.underline) names.push('ansi-underline');
  if (style.fg !== undefined) names.push(`ansi-fg-${style.fg}`);
  if (style.bg !== undefined) names.push(`ansi-bg-${style.bg}`);
  return names.join(' ');
}

/** The 16 basic colours of the 256-colour palette as their SGR numbers; others are left unstyled. */
function paletteColour(index: number, background: boolean): number | undefined {
  if (index < 0 || index > 15) return undefined;
  const base = index < 8 ? 30 + index : 90 + index - 8;
  return background ? base + 10 : base;
}

function applySgr(style: Style, params: number[]): Style {
  const next = { ...style };
  if (params.length === 0) params = [0];
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (p === 0) Object.assign(next, plain(), { fg: undefined, bg: undefined });
    else if (p === 1) next.bold = true;
    else if (p === 2) next.dim = true;
    else if (p === 3) next.italic = true;
    else if (p === 4) next.underline = true;
    else if (p === 22) next.bold = next.dim = false;
    else if (p === 23) next.italic = false;
    else if (p === 24) next.underline = false;
    else if ((p >= 30 && p <= 37) || (p >= 90 && p <= 97)) next.fg = p;
    else if (p === 39) next.fg = undefined;
    else if ((p >= 40 && p <= 47) || (p >= 100 && p <= 107)) next.bg = p;
    else if (p === 49) next.bg = undefined;
    else if (p === 38 || p === 48) {
      const background = p === 48;
      if (params[i + 1] === 5) {
        const colour = paletteColour(params[i + 2], background);
        if (background) next.bg = colour;
        else next.fg = colour;
        i += 2;
      } else if (params[i + 1] === 2) {
        i += 4;
      }
    }
  }
  return next;
}

// CSI sequences (colours among them), OSC strings (window titles, links) and two-byte escapes.
const ESCAPE = /\x1b\[([0-9;:?]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]/g;

/** Lines of segments; a carriage return within a line keeps what followed it, as a terminal shows. */
export function parseAnsi(text: string): Segment[][] {
  const lines: Segment[][] = [];
  let style = plain();
  for (const rawLine of text.split('\n')) {
    const cr = rawLine.replace(/\r+$/, '').lastIndexOf('\r');
    const line = cr >= 0 ? rawLine.slice(cr + 1) : rawLine.replace(/\r+$/, '');
    const segments: Segment[] = [];
    let last = 0;
    const push = (piece: string) => {
      if (piece) segments.push({ text: piece, className: classOf(style) });
    };
    for (const m of line.matchAll(ESCAPE)) {
      push(line.slice(last, m.index));
      last = m.index! + m[0].length;
      if (m[2] === 'm') style = applySgr(style, m[1].split(/[;:]/).filter((s) => s !== '').map(Number));
    }
    push(line.slice(last));
    lines.push(segments);
  }
  return lines;
}

/** The text without escape sequences, for searching and counting. */
export function stripAnsi(text: string): string {
  return text.replace(ESCAPE, '');
}
