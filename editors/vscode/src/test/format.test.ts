import * as assert from "node:assert/strict";
import { test } from "node:test";
import { contextFill, formatCost, formatTokens, relativeTime, statusText } from "../format";
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

test("the sandbox label says which OS sandbox commands run in, or that there is none", () => {
  const pol = (value: unknown) => ({ sandbox: { value, source: "default" } });
  assert.equal(sandboxLabel(pol({ profile: "workspace-write", mechanism: "landlock", abi: 7 })), "workspace-write sandbox");
  assert.equal(sandboxLabel(pol({ profile: "none", mechanism: "landlock" })), "no sandbox");
  assert.equal(sandboxLabel(pol({ profile: "workspace-write", mechanism: "unavailable", note: "no Landlock" })), "no OS sandbox");
  assert.equal(sandboxLabel({}), undefined);
  assert.equal(sandboxLabel(undefined), undefined);
});
