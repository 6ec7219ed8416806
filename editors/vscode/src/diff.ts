// Applying octet's unified diffs (approval previews, structured changes)
// to file contents, to show them in VS Code's diff editor.

interface Hunk {
  oldStart: number;
  oldCount: number;
  lines: string[];
}

const hunkHeader = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

function parseHunks(diff: string): Hunk[] | undefined {
  const hunks: Hunk[] = [];
  let cur: Hunk | undefined;
  for (const line of diff.split("\n")) {
    const m = hunkHeader.exec(line);
    if (m) {
      cur = { oldStart: Number(m[1]), oldCount: m[2] === undefined ? 1 : Number(m[2]), lines: [] };
      hunks.push(cur);
      continue;
    }
    if (cur === undefined) {
      continue; // the --- and +++ header, or text before it
    }
    if (line === "" ) {
      continue; // the end of the diff text (a context line is " ")
    }
    const c = line[0];
    if (c === " " || c === "-" || c === "+" || c === "\\") {
      cur.lines.push(line);
    } else {
      return undefined;
    }
  }
  return hunks;
}

/** reverseDiff swaps the sides of a unified diff. */
export function reverseDiff(diff: string): string {
  return diff
    .split("\n")
    .map((line) => {
      const m = hunkHeader.exec(line);
      if (m) {
        const old = m[2] === undefined ? m[1] : `${m[1]},${m[2]}`;
        const neu = m[4] === undefined ? m[3] : `${m[3]},${m[4]}`;
        return `@@ -${neu} +${old} @@${line.slice(m[0].length)}`;
      }
      if (line.startsWith("--- ")) {
        return "+++ " + line.slice(4);
      }
      if (line.startsWith("+++ ")) {
        return "--- " + line.slice(4);
      }
      if (line.startsWith("-")) {
        return "+" + line.slice(1);
      }
      if (line.startsWith("+")) {
        return "-" + line.slice(1);
      }
      return line;
    })
    .join("\n");
}

/**
 * applyDiff applies a unified diff to original and returns the new
 * content, or undefined when the diff has no hunks or does not match
 * original (the file changed since the diff was made).
 */
export function applyDiff(original: string, diff: string): string | undefined {
  const hunks = parseHunks(diff);
  if (hunks === undefined || hunks.length === 0) {
    return undefined;
  }
  let src = original === "" ? [] : original.split("\n");
  let trailing = false;
  if (src.length > 0 && src[src.length - 1] === "") {
    src = src.slice(0, -1);
    trailing = true;
  } else if (src.length === 0) {
    trailing = true;
  }
  const out: string[] = [];
  let pos = 0; // next line of src to copy
  let newTrailing = trailing;
  for (const h of hunks) {
    const start = h.oldCount === 0 ? h.oldStart : h.oldStart - 1;
    if (start < pos || start > src.length) {
      return undefined;
    }
    out.push(...src.slice(pos, start));
    pos = start;
    let lastSide = "";
    for (const line of h.lines) {
      const c = line[0];
      const text = line.slice(1);
      if (c === "\\") {
        if (lastSide === " " || lastSide === "+") {
          newTrailing = false;
        }
        continue;
      }
      if (c === " " || c === "-") {
        if (src[pos] !== text) {
          return undefined;
        }
        pos++;
        if (c === " ") {
          out.push(text);
        }
      } else {
        out.push(text);
      }
      lastSide = c;
    }
    if (pos === src.length && lastSide !== "") {
      // The hunk reaches the end: the new end has a newline unless marked.
      const marked = h.lines.some((l, i) => l[0] === "\\" && i > 0 && (h.lines[i - 1][0] === "+" || h.lines[i - 1][0] === " "));
      newTrailing = !marked;
    }
  }
  out.push(...src.slice(pos));
  if (out.length === 0) {
    return "";
  }
  return out.join("\n") + (newTrailing ? "\n" : "");
}

/** diffPath returns the path a unified diff is about (its +++ or --- side). */
export function diffPath(diff: string): string | undefined {
  let old: string | undefined;
  let neu: string | undefined;
  for (const line of diff.split("\n")) {
    if (line.startsWith("--- ")) {
      old = strip(line.slice(4));
    } else if (line.startsWith("+++ ")) {
      neu = strip(line.slice(4));
    } else if (hunkHeader.test(line)) {
      break;
    }
  }
  return neu ?? old;
}

function strip(p: string): string | undefined {
  const name = p.split("\t")[0].trim();
  if (name === "/dev/null") {
    return undefined;
  }
  return name.startsWith("a/") || name.startsWith("b/") ? name.slice(2) : name;
}
