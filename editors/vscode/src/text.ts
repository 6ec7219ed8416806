// Untrusted text on the surfaces VS Code draws itself. Text from the model
// (tool arguments, titles, child agents' names and tasks), from the
// repository (file names, a model name in its settings) or from the server
// goes through displayText before it reaches a status bar item, a
// notification, a quick pick, a tree item, a dialog or an editor title:
// several of those interpret what they are given, and none of them shows
// what a display would hide. (The chat webview escapes HTML on top:
// markdown.ts.)

/**
 * Sink is a kind of surface, named by what it interprets:
 *
 *   - "label": one line in which VS Code draws `$(name)` as an icon: status
 *     bar text, quick pick labels, descriptions and details. Such a `$(`
 *     becomes `\$(`, which VS Code shows as the literal `$(`.
 *   - "message": one line in which VS Code makes `[text](command:…)`
 *     (also https: and file:) a link, and a command link runs the command
 *     when clicked: notifications. The `](` of such a link becomes `] (`.
 *     (VS Code also folds a notification's newlines and cuts it at 1,000
 *     characters.)
 *   - "line": one line of plain text: tree items, editor and input box
 *     titles, dialog messages, the chat's one-line summaries.
 *   - "block": plain text that keeps its newlines: tooltips, dialog details.
 */
export type Sink = "label" | "message" | "line" | "block";

/**
 * displayText renders untrusted text for a sink, removing nothing a
 * person needs to see:
 *
 *   - C0 controls but newline and tab, CR included, in caret notation
 *     (`^[`, `^M`), DEL as `^?`;
 *   - C1 controls, format characters (bidirectional controls, zero-width
 *     characters, tag characters), separators other than the space,
 *     variation selectors, invisible fillers and lone surrogates as
 *     `⟨U+XXXX⟩`, four or more of one in a row as `⟨N × U+XXXX⟩`;
 *   - a run of blanks 32 columns wide as `⟨N spaces⟩`, so nothing is pushed
 *     out of sight;
 *   - on one-line sinks, a newline as `⏎`; in a block, two or more blank
 *     lines as `⟨N blank lines⟩`;
 *   - what the sink interprets escaped (see Sink);
 *   - beyond max characters, cut with an explicit `…⟨N more characters⟩`
 *     (unless the rest is no longer than that).
 *
 * It is the notation of octet's approval text (tools/approval_text.go),
 * except that a literal `⟨` stays as it is, so text the server already
 * rendered passes through unchanged (these surfaces never approve: only
 * the chat's approval card does, with the server's text).
 */
export function displayText(s: string, sink: Sink, max = Infinity): string {
  const chars = Array.from(s); // code points; a lone surrogate stays one
  let out = "";
  for (let i = 0; i < chars.length; ) {
    const [piece, next] = render(chars, i, sink);
    if (out.length + piece.length > max) {
      const left = chars.length - i;
      const marker = `…⟨${left} more character${left === 1 ? "" : "s"}⟩`;
      // A marker longer than what it stands for would hide nothing.
      const rest = left <= marker.length ? displayText(chars.slice(i).join(""), sink) : undefined;
      out += rest !== undefined && rest.length <= marker.length ? rest : marker;
      break;
    }
    out += piece;
    i = next;
  }
  return sink === "message" ? noLinks(out) : out;
}

// VS Code's link syntax in notifications (parseLinkedText in its
// src/vs/base/common/linkedText.ts).
const link = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi;

/** noLinks breaks every link VS Code would make of s, until none is left. */
function noLinks(s: string): string {
  for (let prev = ""; prev !== s; ) {
    prev = s;
    s = s.replace(link, (m) => m.replace("](", "] ("));
  }
  return s;
}

// VS Code's icon syntax ($(name) or $(name~modifier), in its
// src/vs/base/common/themables.ts).
const iconName = /[A-Za-z0-9-]/;
const iconModifier = /[A-Za-z]/;

/** iconAt reports whether an icon VS Code would draw starts at chars[i]. */
function iconAt(chars: string[], i: number): boolean {
  if (chars[i] !== "$" || chars[i + 1] !== "(") {
    return false;
  }
  let j = i + 2;
  while (j < chars.length && iconName.test(chars[j])) {
    j++;
  }
  if (j === i + 2) {
    return false;
  }
  if (chars[j] === "~") {
    const k = ++j;
    while (j < chars.length && iconModifier.test(chars[j])) {
      j++;
    }
    if (j === k) {
      return false;
    }
  }
  return chars[j] === ")";
}

const wideBlankColumns = 32;
const minEscapedRun = 4;
const minBlankLines = 2;

/** render returns what chars[i] (and the run it starts) shows as, and the index after it. */
function render(chars: string[], i: number, sink: Sink): [string, number] {
  const c = chars[i];
  const cp = c.codePointAt(0)!;
  if (c === " " || c === "\t") {
    return blankRun(chars, i);
  }
  if (c === "\n") {
    return sink === "block" ? newlineRun(chars, i) : ["⏎", i + 1];
  }
  if (cp < 0x20) {
    return ["^" + String.fromCharCode(cp + 0x40), i + 1];
  }
  if (cp === 0x7f) {
    return ["^?", i + 1];
  }
  if (hidden(cp)) {
    let j = i + 1;
    while (j < chars.length && chars[j] === c) {
      j++;
    }
    const u = `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
    return j - i >= minEscapedRun ? [`⟨${j - i} × ${u}⟩`, j] : [`⟨${u}⟩`, i + 1];
  }
  if (sink === "label" && iconAt(chars, i)) {
    return ["\\$", i + 1];
  }
  return [c, i + 1];
}

function blankRun(chars: string[], i: number): [string, number] {
  let j = i;
  let spaces = 0;
  let tabs = 0;
  for (; j < chars.length && (chars[j] === " " || chars[j] === "\t"); j++) {
    if (chars[j] === " ") {
      spaces++;
    } else {
      tabs++;
    }
  }
  if (spaces + 8 * tabs < wideBlankColumns) {
    return [chars.slice(i, j).join(""), j];
  }
  const what = tabs === 0 ? `${spaces} spaces` : spaces === 0 ? `${tabs} tabs` : `${spaces + tabs} spaces and tabs`;
  return [`⟨${what}⟩`, j];
}

function newlineRun(chars: string[], i: number): [string, number] {
  let j = i;
  while (j < chars.length && chars[j] === "\n") {
    j++;
  }
  const blank = j - i - 1;
  return blank >= minBlankLines ? [`\n⟨${blank} blank lines⟩\n`, j] : ["\n".repeat(j - i), j];
}

const invisible = /[\p{Cf}\p{Zl}\p{Zp}\p{Zs}]/u;

/** hidden reports whether a display could hide cp, show it as something else, or let it reorder the text around it. */
function hidden(cp: number): boolean {
  if (cp >= 0x80 && cp <= 0x9f) {
    return true; // C1 controls
  }
  if (cp >= 0xd800 && cp <= 0xdfff) {
    return true; // a lone surrogate
  }
  if (cp < 0x80) {
    return false; // printable ASCII (controls are handled before)
  }
  if (invisible.test(String.fromCodePoint(cp))) {
    return true; // format characters, separators, other spaces
  }
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef) || (cp >= 0x180b && cp <= 0x180f)) {
    return true; // variation selectors
  }
  switch (cp) {
    case 0x034f: // combining grapheme joiner
    case 0x115f:
    case 0x1160:
    case 0x3164:
    case 0xffa0: // Hangul fillers
    case 0x2800: // braille pattern blank
    case 0x17b4:
    case 0x17b5: // Khmer inherent vowels
      return true;
  }
  return false;
}
