import * as assert from "node:assert/strict";
import { test } from "node:test";
import { contextFill, formatCost, formatTokens, formatWhen, relativeTime, rewindPicks, statusText } from "../format";
import { modeOf, policyOf, sandboxLabel } from "../policy";

test("costs, tokens and context fill", () => {
  assert.equal(formatCost(undefined), "");
  assert.equal(formatCost(4200), "$0.0042");
  assert.equal(formatCost(12_345_678), "$12.35");
  assert.equal(formatTokens(950), "950");
  assert.equal(formatTokens(12_345), "12k");
  assert.equal(formatTokens(1_500), "1.5k");
  assert.equal(contextFill({ contextTokens: 50, contextWindow: 200 }), 25);
  assert.equal(contextFill({ contextTokens: 50 }), undefined);
});

test("the status text has state, model, cost and context fill; unknown usage is a lower bound", () => {
  const s = statusText("running", "gpt-5", { costMicros: 10_000, complete: false, contextTokens: 10, contextWindow: 100 });
  assert.equal(s, "$(sync~spin) octet: running · gpt-5 · ≥$0.0100 · ctx 10%");
  assert.equal(statusText("none", "", {}), "$(circle-outline) octet: no session");
});

test("policy modes map to octet's effect policies; unknown modes ask", () => {
  assert.equal(policyOf("ask"), "controlled_bash_approval");
  assert.equal(policyOf("auto-read"), "controlled");
  assert.equal(policyOf("full-access"), "unsafe_host");
  assert.equal(policyOf("bogus"), "controlled_bash_approval");
  assert.equal(modeOf("unsafe_host")?.mode, "full-access");
});

test("relative times", () => {
  const now = Date.parse("2026-12-01T12:00:00Z");
  assert.equal(relativeTime("2026-12-01T11:59:30Z", now), "just now");
  assert.equal(relativeTime("2026-12-01T11:30:00Z", now), "30 min ago");
  assert.equal(relativeTime("2026-11-29T12:00:00Z", now), "2 d ago");
  assert.equal(relativeTime("garbage", now), "");
});

test("rewind dates its prompts in words, in local time, and names them as typed", () => {
  const now = new Date(2026, 11, 5, 14, 30);
  const at = (...a: [number, number, number, number, number]) => new Date(...a).toISOString();
  assert.equal(formatWhen(new Date(2026, 11, 5, 14, 29, 40).toISOString(), now), "just now");
  assert.equal(formatWhen(at(2026, 11, 5, 14, 5), now), "25 min ago · 14:05");
  assert.equal(formatWhen(at(2026, 11, 4, 9, 12), now), "yesterday 09:12");
  assert.equal(formatWhen(at(2026, 10, 3, 8, 0), now), "3 Nov 08:00");
  assert.equal(formatWhen(at(2025, 11, 31, 23, 59), now), "31 Dec 2025 23:59");
  assert.equal(formatWhen("2026-12-05T14:29:30.123456789Z", new Date("2026-12-05T14:30:00Z")), "just now", "octet's nanoseconds");
  assert.equal(formatWhen("garbage", now), "");
  const [p] = rewindPicks([{ id: "e", parent: "p", type: "user", time: at(2026, 11, 4, 9, 12), text: "Fix @a.go\n\nThe user attached this context:\n\n--- attachment 1: a.go ---\nx\n--- end of attachment 1 ---\n" }], now);
  assert.deepEqual({ label: p.label, description: p.description }, { label: "Fix @a.go", description: "yesterday 09:12" });
});

test("the sandbox label says which OS sandbox commands run in, or that there is none", () => {
  const pol = (value: unknown) => ({ sandbox: { value, source: "default" } });
  assert.equal(sandboxLabel(pol({ profile: "workspace-write", mechanism: "landlock", abi: 7 })), "workspace-write sandbox");
  assert.equal(sandboxLabel(pol({ profile: "none", mechanism: "landlock" })), "no sandbox");
  assert.equal(sandboxLabel(pol({ profile: "workspace-write", mechanism: "unavailable", note: "no Landlock" })), "no OS sandbox");
  assert.equal(sandboxLabel({}), undefined);
  assert.equal(sandboxLabel(undefined), undefined);
});
