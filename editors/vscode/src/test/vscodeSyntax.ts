// VS Code's own parsers, as in its workbench (src/vs/base/common/
// iconLabels.ts and linkedText.ts), for tests: what a label draws as an
// icon, what a notification makes a link. Written apart from text.ts, so a
// mistake there is not repeated here.

const icon = /(\\)?\$\(([A-Za-z0-9-]+(?:~[A-Za-z]+)?)\)/g;
const link = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi;

/** icons returns the icons a label would draw. */
export function icons(label: string): string[] {
  return [...label.matchAll(icon)].filter((m) => m[1] === undefined).map((m) => m[2]);
}

/** shownLabel is the text a label shows: an escaped \$(name) as $(name) (icons stay as written). */
export function shownLabel(label: string): string {
  return label.replace(icon, (m, esc: string | undefined, name: string) => (esc ? `$(${name})` : m));
}

/** links returns the targets of the links a notification would make. */
export function links(message: string): string[] {
  return [...message.matchAll(link)].map((m) => m[2]);
}
