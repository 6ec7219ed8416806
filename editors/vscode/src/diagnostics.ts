// The editor's diagnostics as octet/diagnostics carries them (LSP
// Diagnostics), and the per-document debounce that sends them once a
// language server has settled. It knows nothing of VS Code.

import type { LspDiagnostic } from "./protocol";

/** The fields of a VS Code Diagnostic that octet takes (severity 0 Error … 3 Hint). */
export interface EditorDiagnostic {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  severity: number;
  code?: string | number | { value: string | number };
  source?: string;
  message: string;
}

/** toLsp converts an editor diagnostic to LSP's (severity 1 Error … 4 Hint). */
export function toLsp(d: EditorDiagnostic): LspDiagnostic {
  const out: LspDiagnostic = {
    range: { start: { line: d.range.start.line, character: d.range.start.character }, end: { line: d.range.end.line, character: d.range.end.character } },
    message: d.message,
  };
  if (d.severity >= 0 && d.severity <= 3) {
    out.severity = (d.severity + 1) as 1 | 2 | 3 | 4;
  }
  const code = typeof d.code === "object" && d.code !== null ? d.code.value : d.code;
  if (code !== undefined) {
    out.code = code;
  }
  if (d.source) {
    out.source = d.source;
  }
  return out;
}

/** The debounce of octet/diagnostics: after a document's last report. */
export const diagnosticsDelayMs = 300;

/**
 * Debouncer calls send(key) once key has been quiet for delay ms since its
 * last schedule(key); each key on its own.
 */
export class Debouncer {
  private timers = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(
    private readonly send: (key: string) => void,
    private readonly delay = diagnosticsDelayMs,
  ) {}

  schedule(key: string): void {
    const t = this.timers.get(key);
    if (t !== undefined) {
      clearTimeout(t);
    }
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.send(key);
      }, this.delay),
    );
  }

  dispose(): void {
    for (const t of this.timers.values()) {
      clearTimeout(t);
    }
    this.timers.clear();
  }
}
