// What a prompt carries besides its text: images (images.ts) and
// references to the workspace — a file, or a range of one (a selection,
// a symbol) — sent as octet/prompt context {uri, range?}, which octet
// reads through the editor's buffers and appends to the prompt. It knows
// nothing of VS Code.

import { addImage, imageLabel, type PromptImage, promptContext } from "./images";

/** A position and a range as LSP has them (0-based, UTF-16 characters). */
export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}

/** A reference to (part of) a workspace file, waiting for the next prompt. */
export interface PromptRef {
  /** uri is the file's file:// URI. */
  uri: string;
  /** range is the part of it, when not all of it. */
  range?: Range;
  /** label is what the chip says ("a.ts", "a.ts:3-7", "greet · a.ts:3-7"). */
  label: string;
}

/** The most references one prompt takes (octet's bound on text attachments). */
export const refLimit = 16;

/** A chip of the composer or of a prompt: its label and what it is. */
export interface Chip {
  label: string;
  kind: "image" | "file" | "range";
}

/**
 * lines trims a range that ends at the start of a line (a selection of
 * whole lines) to the end of the line before (lineLength gives its
 * length), so it names the lines it holds.
 */
export function lines(r: Range, lineLength: (line: number) => number): Range {
  if (r.end.character === 0 && r.end.line > r.start.line) {
    return { start: r.start, end: { line: r.end.line - 1, character: lineLength(r.end.line - 1) } };
  }
  return r;
}

/** refLabel names a reference: "a.ts", "a.ts:3", "a.ts:3-7", "greet · a.ts:3-7". */
export function refLabel(rel: string, range?: Range, name?: string): string {
  if (!range) {
    return rel;
  }
  const a = range.start.line + 1;
  const b = range.end.line + 1;
  const where = `${rel}:${a === b ? a : `${a}-${b}`}`;
  return name ? `${name} · ${where}` : where;
}

function sameRange(a?: Range, b?: Range): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** Attachments are what waits for the next prompt: images, then references. */
export class Attachments {
  images: PromptImage[] = [];
  refs: PromptRef[] = [];

  /** addImage adds an image; it returns why it cannot, or "". */
  addImage(name: string, bytes: Uint8Array): string {
    const r = addImage(this.images, name, bytes);
    if (typeof r === "string") {
      return r;
    }
    this.images = r;
    return "";
  }

  /** addRef adds a reference (once: the same one again is ignored); it returns why it cannot, or "". */
  addRef(ref: PromptRef): string {
    if (this.refs.some((r) => r.uri === ref.uri && sameRange(r.range, ref.range))) {
      return "";
    }
    if (this.refs.length >= refLimit) {
      return `A prompt takes at most ${refLimit} files and selections.`;
    }
    this.refs = [...this.refs, ref];
    return "";
  }

  /** remove removes the i-th chip (images first, then references). */
  remove(i: number): void {
    if (i < this.images.length) {
      this.images = this.images.filter((_, j) => j !== i);
    } else {
      this.refs = this.refs.filter((_, j) => j !== i - this.images.length);
    }
  }

  /** chips are the composer's chips, in the order remove counts them. */
  chips(): Chip[] {
    return [
      ...this.images.map((i): Chip => ({ label: imageLabel(i.name, i.bytes), kind: "image" })),
      ...this.refs.map((r): Chip => ({ label: r.label, kind: r.range ? "range" : "file" })),
    ];
  }

  /** take returns what waits and empties it (the prompt takes it). */
  take(): Attachments {
    const a = new Attachments();
    a.images = this.images;
    a.refs = this.refs;
    this.images = [];
    this.refs = [];
    return a;
  }

  /** empty reports whether nothing waits. */
  empty(): boolean {
    return this.images.length === 0 && this.refs.length === 0;
  }

  /** context is the octet/prompt context: the references, then the images. */
  context(): object[] {
    return [...this.refs.map((r) => (r.range ? { uri: r.uri, range: r.range } : { uri: r.uri })), ...promptContext(this.images)];
  }
}

const attachedMarker = "\n\nThe user attached this context:\n";
const attachmentHeader = /^--- attachment (\d+): (.*) ---$/;

/**
 * splitAttached splits a recorded prompt into the text the user typed and
 * the titles of the context octet appended to it (octet's "a.ts lines
 * 3-7" named as the composer names it, "a.ts:3-7"), as a resumed chat
 * shows them: chips, not the attached text. A text not in octet's form is
 * returned whole.
 */
export function splitAttached(text: string): { text: string; titles: string[] } {
  const at = text.lastIndexOf(attachedMarker);
  if (at < 0) {
    return { text, titles: [] };
  }
  const titles: string[] = [];
  const rest = text.slice(at + attachedMarker.length).split("\n");
  let n = 0;
  for (const line of rest) {
    const m = attachmentHeader.exec(line);
    if (m && Number(m[1]) === n + 1) {
      n++;
      titles.push(
        m[2]
          .replace(/ \(editor buffer, unsaved changes included\)$/, "")
          .replace(/ lines (\d+)-(\d+)$/, (_, a: string, b: string) => (a === b ? `:${a}` : `:${a}-${b}`)),
      );
    }
  }
  if (n === 0 || !rest.includes(`--- end of attachment ${n} ---`)) {
    return { text, titles: [] };
  }
  return { text: text.slice(0, at), titles };
}

/**
 * rankFiles returns the workspace paths (relative, "/"-separated) an
 * @-mention's query names, best first, at most limit: a name that starts
 * with the query, then one that holds it, then a path that holds it, then
 * one that holds its characters in order (case is ignored); shorter
 * paths first among equals. An empty query lists the first paths.
 */
export function rankFiles(paths: string[], query: string, limit: number): string[] {
  const q = query.toLowerCase();
  const scored: { p: string; score: number }[] = [];
  for (const p of paths) {
    const lp = p.toLowerCase();
    const name = lp.slice(lp.lastIndexOf("/") + 1);
    let score: number;
    if (q === "" || name.startsWith(q)) {
      score = 0;
    } else if (name.includes(q)) {
      score = 1;
    } else if (lp.includes(q)) {
      score = 2;
    } else if (inOrder(lp, q)) {
      score = 3;
    } else {
      continue;
    }
    scored.push({ p, score });
  }
  scored.sort((a, b) => a.score - b.score || a.p.length - b.p.length || (a.p < b.p ? -1 : 1));
  return scored.slice(0, limit).map((s) => s.p);
}

function inOrder(s: string, q: string): boolean {
  let i = 0;
  for (const c of s) {
    if (c === q[i]) {
      i++;
      if (i === q.length) {
        return true;
      }
    }
  }
  return false;
}
