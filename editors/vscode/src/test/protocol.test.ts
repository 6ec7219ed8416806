import * as assert from "node:assert/strict";
import { test } from "node:test";
import { clientCapabilities } from "../protocol";

test("the client takes octet's approvals and events, saves documents and sends diagnostics, and takes no work-done progress (VS Code would draw its text in the status bar)", () => {
  const caps: { experimental?: unknown; window?: { workDoneProgress?: boolean; showMessage?: object } } = {
    window: { workDoneProgress: true, showMessage: {} },
  };
  clientCapabilities(caps);
  assert.deepEqual(caps.window, { workDoneProgress: false, showMessage: {} });
  assert.deepEqual(caps.experimental, { octet: { confirmEffect: true, events: true, recoveredOutput: true, saveDocuments: true, diagnostics: true } });
});
