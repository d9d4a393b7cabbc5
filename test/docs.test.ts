import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Every markdown page a reader reaches from the README: README.md and docs/**. */
async function pages(): Promise<string[]> {
  const found = [join(root, "README.md")];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.name.endsWith(".md")) found.push(path);
    }
  };
  await walk(join(root, "docs"));
  return found;
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as `-`. */
function anchors(markdown: string): Set<string> {
  const prose = markdown.replace(/```[\s\S]*?```/g, "");
  const slugs = [...prose.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) =>
    (m[1] ?? "")
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-"),
  );
  return new Set(slugs);
}

/** Link targets of `[text](target)` outside fenced code blocks and inline code. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1] ?? "");
}

describe("the documentation's links", () => {
  it("resolve, for every relative link in README.md and docs/, to a file, folder or heading of the repository", async () => {
    const broken: string[] = [];
    const outside: string[] = [];
    for (const page of await pages()) {
      for (const target of linkTargets(await readFile(page, "utf8"))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const [path = "", anchor] = target.split("#");
        const resolved = path === "" ? page : join(dirname(page), decodeURIComponent(path));
        const name = `${relative(root, page)} -> ${target}`;
        if (relative(root, resolved).startsWith("..")) outside.push(name);
        else if (!existsSync(resolved)) broken.push(name);
        else if (anchor !== undefined && resolved.endsWith(".md")) {
          if (!anchors(await readFile(resolved, "utf8")).has(anchor)) broken.push(name);
        }
      }
    }
    expect(outside).toEqual([]);
    expect(broken).toEqual([]);
  });
});

describe("the Python SDK's page", () => {
  it("is the Python package's README, byte for byte", async () => {
    const page = await readFile(join(root, "docs/sdk-python.md"), "utf8");
    const packageReadme = await readFile(join(root, "clients/python/README.md"), "utf8");
    expect(packageReadme).toBe(page);
  });

  it("links nowhere relative, so it reads the same from docs/ and from the package", async () => {
    const page = await readFile(join(root, "docs/sdk-python.md"), "utf8");
    const relativeLinks = linkTargets(page).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
    expect(relativeLinks).toEqual([]);
  });
});
