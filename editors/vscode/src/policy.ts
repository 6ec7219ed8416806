// Policy modes: the names the extension shows for octet's effect policies.

import type { EffectiveToolPolicy, EffectPolicy } from "./protocol";

/** A policy mode of the octet.policyMode setting. */
export type PolicyMode = "ask" | "auto-read" | "full-access";

interface ModeInfo {
  mode: PolicyMode;
  policy: EffectPolicy;
  label: string;
  description: string;
}

/** The modes, strictest first. */
export const modes: readonly ModeInfo[] = [
  { mode: "ask", policy: "controlled_bash_approval", label: "Ask", description: "ask before every edit and every command" },
  { mode: "auto-read", policy: "controlled", label: "Auto-read", description: "read-only commands run; ask before edits and other commands" },
  { mode: "full-access", policy: "unsafe_host", label: "Full access", description: "no approvals: edits and commands run on the host" },
];

/** policyOf returns the effect policy of a mode ("ask" for an unknown one). */
export function policyOf(mode: string | undefined): EffectPolicy {
  return (modes.find((m) => m.mode === mode) ?? modes[0]).policy;
}

/** modeOf returns the mode of an effect policy, or undefined. */
export function modeOf(policy: string | undefined): ModeInfo | undefined {
  return modes.find((m) => m.policy === policy);
}

/** The value of EffectiveToolPolicy.sandbox. */
interface SandboxValue {
  profile?: string;
  mechanism?: string;
  abi?: number;
  note?: string;
}

/**
 * sandboxLabel says in a few words which OS sandbox a session's commands
 * run in ("workspace-write sandbox", "no sandbox", "no OS sandbox" when
 * the host has none), or undefined when the policy does not say.
 */
export function sandboxLabel(p: EffectiveToolPolicy | undefined): string | undefined {
  const v = p?.sandbox?.value as SandboxValue | undefined;
  if (!v || typeof v !== "object") {
    return undefined;
  }
  if (v.mechanism === "unavailable") {
    return "no OS sandbox";
  }
  if (typeof v.profile !== "string" || v.profile === "none") {
    return "no sandbox";
  }
  return `${v.profile} sandbox`;
}
