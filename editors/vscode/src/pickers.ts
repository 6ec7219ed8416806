// The pickers under the chat's prompt: the model, its reasoning effort
// and the policy mode, as the webview's selects show them. It knows
// nothing of VS Code.

import { modeOf, modes } from "./policy";
import type { ModelInfo } from "./protocol";
import { displayText } from "./text";

/** The reasoning efforts octet/setReasoning takes ("" is the provider's default). */
export const efforts = ["", "none", "minimal", "low", "medium", "high", "xhigh"] as const;

/** A choice of a picker. */
export interface Choice {
  value: string;
  label: string;
  title?: string;
}

/** The pickers: each one's choices and value. */
export interface Pickers {
  models: Choice[];
  model: string;
  efforts: Choice[];
  effort: string;
  /** effortNote is why the effort cannot be chosen ("" when it can). */
  effortNote: string;
  modes: Choice[];
  mode: string;
}

/**
 * pickers returns the pickers for the catalog's models (the current one
 * among them even when the catalog does not list it), the session's
 * effort and its effect policy. A model octet knows to have no reasoning
 * controls (or does not know) cannot take an effort.
 */
export function pickers(models: ModelInfo[], model: string, effort: string, policy: string | undefined): Pickers {
  const ids = models.map((m) => m.id);
  if (model !== "" && !ids.includes(model)) {
    ids.unshift(model);
  }
  const info = models.find((m) => m.id === model);
  return {
    models: ids.map((id) => ({ value: id, label: displayText(id, "label", 60) })),
    model,
    efforts: efforts.map((e) => ({ value: e, label: e === "" ? "default effort" : `${e} effort` })),
    effort,
    effortNote: info?.reasoning === true ? "" : "this model has no reasoning controls octet knows of",
    modes: modes.map((m) => ({ value: m.policy, label: m.label, title: m.description })),
    mode: modeOf(policy)?.policy ?? modes[0].policy,
  };
}
