import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** PackedPackage is one workspace package as `npm pack` wrote it. */
export interface PackedPackage {
  readonly name: string;
  readonly version: string;
  /** Absolute path of the tarball. */
  readonly tarball: string;
  /** The paths the tarball holds, relative to the package root. */
  readonly files: readonly string[];
  readonly bin: Record<string, string> | undefined;
  readonly dependencies: Record<string, string>;
}

/** InstalledTree is what an install left in a project's node_modules. */
export interface InstalledTree {
  /** Every installed package's name, nested copies included, sorted. */
  readonly packages: readonly string[];
  /** The size of node_modules on disk, in KiB (`du -sk`). */
  readonly kibibytes: number;
}

interface LockEntry {
  readonly link?: boolean;
  readonly dev?: boolean;
  readonly devOptional?: boolean;
  readonly dependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly [field: string]: unknown;
}

/**
 * npmEnv is this process's environment without the `npm_*` variables an enclosing `npm test`
 * sets: an inherited `npm_config_local_prefix` or `npm_package_json` would point a nested npm
 * at the repository instead of the project it runs in. The cache location is kept, since the
 * offline installs read it.
 */
export function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const kept = new Set(["npm_config_cache", "npm_config_userconfig", "npm_config_registry"]);
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.toLowerCase().startsWith("npm_") || kept.has(key.toLowerCase()),
    ),
  );
  delete env.INIT_CWD;
  return { ...env, ...extra };
}

/**
 * packWorkspaces runs `npm pack` for `workspaces` (folders of the repository at `root`) into
 * `dest`, without lifecycle scripts (the packages' dist/ must already be built), and returns
 * each package by name.
 */
export function packWorkspaces(
  root: string,
  workspaces: readonly string[],
  dest: string,
): Map<string, PackedPackage> {
  const out = execFileSync(
    "npm",
    [
      "pack",
      "--json",
      "--ignore-scripts",
      "--pack-destination",
      dest,
      ...workspaces.flatMap((w) => ["--workspace", w]),
    ],
    { cwd: root, env: npmEnv(), encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
  const packed = new Map<string, PackedPackage>();
  for (const entry of JSON.parse(out) as {
    name: string;
    version: string;
    filename: string;
    files: { path: string }[];
  }[]) {
    const tarball = join(dest, entry.filename);
    const manifest = JSON.parse(
      execFileSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" }),
    ) as { bin?: Record<string, string>; dependencies?: Record<string, string> };
    packed.set(entry.name, {
      name: entry.name,
      version: entry.version,
      tarball,
      files: entry.files.map((f) => f.path),
      bin: manifest.bin,
      dependencies: manifest.dependencies ?? {},
    });
  }
  return packed;
}

/**
 * installPacked makes `dir` a fresh project that depends on the packed package `top` and
 * installs it with `npm ci --offline`: what a user gets from `npm install <top>`, resolved to
 * the versions the repository's package-lock.json pins and read from the npm cache that
 * `npm ci` filled, so it needs no network. The other Spillway packages `top` depends on come
 * from their tarballs in `packed`.
 *
 * Guarantees: the lockfile it writes holds exactly the packages Node's resolution reaches from
 * `top` (dependencies, optional and peer dependencies, in the places the repository's lockfile
 * puts them); a package missing from the cache fails the install (ENOTCACHED), never fetches.
 */
export function installPacked(
  dir: string,
  root: string,
  packed: ReadonlyMap<string, PackedPackage>,
  top: string,
  env: NodeJS.ProcessEnv = {},
): InstalledTree {
  const topPackage = packed.get(top);
  if (topPackage === undefined) throw new Error(`${top} was not packed`);
  const manifest = {
    name: "spillway-consumer",
    version: "1.0.0",
    private: true,
    type: "module",
    dependencies: { [top]: `file:${topPackage.tarball}` },
    // The server's regex engine builds its native addon in an install script.
    allowScripts: { re2: true },
  };
  const repoLock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const packages: Record<string, unknown> = {
    "": { name: manifest.name, version: manifest.version, dependencies: manifest.dependencies },
  };
  const place = (from: string, name: string): void => {
    let at = from;
    for (;;) {
      const path = `${at === "" ? "" : `${at}/`}node_modules/${name}`;
      if (path in packages) return;
      const entry = repoLock.packages[path];
      if (entry !== undefined && entry.link !== true && !packed.has(name)) {
        const { dev: _dev, devOptional: _devOptional, ...kept } = entry;
        packages[path] = kept;
        for (const dep of Object.keys({
          ...entry.dependencies,
          ...entry.optionalDependencies,
          ...entry.peerDependencies,
        })) {
          place(path, dep);
        }
        return;
      }
      if (at === "") break;
      const parent = at.lastIndexOf("/node_modules/");
      at = parent < 0 ? "" : at.slice(0, parent);
    }
    const own = packed.get(name);
    if (own === undefined)
      throw new Error(`${name} (needed by ${from}) is not in package-lock.json`);
    const path = `node_modules/${name}`;
    packages[path] = {
      version: own.version,
      resolved: `file:${own.tarball}`,
      ...(own.bin === undefined ? {} : { bin: own.bin }),
      dependencies: own.dependencies,
    };
    for (const dep of Object.keys(own.dependencies)) place(path, dep);
  };
  place("", top);
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(
    join(dir, "package-lock.json"),
    `${JSON.stringify({ name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`,
  );
  execFileSync("npm", ["ci", "--offline", "--no-audit", "--no-fund"], {
    cwd: dir,
    env: npmEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  return measureInstall(dir);
}

/** measureInstall lists the packages under `dir`/node_modules and its size on disk. */
export function measureInstall(dir: string): InstalledTree {
  const packages: string[] = [];
  const walk = (modules: string): void => {
    let names: string[];
    try {
      names = readdirSync(modules);
    } catch {
      return;
    }
    for (const name of names) {
      if (name.startsWith(".")) continue;
      if (name.startsWith("@")) {
        for (const scoped of readdirSync(join(modules, name))) {
          packages.push(`${name}/${scoped}`);
          walk(join(modules, name, scoped, "node_modules"));
        }
      } else {
        packages.push(name);
        walk(join(modules, name, "node_modules"));
      }
    }
  };
  walk(join(dir, "node_modules"));
  const du = execFileSync("du", ["-sk", join(dir, "node_modules")], { encoding: "utf8" });
  return { packages: packages.sort(), kibibytes: Number.parseInt(du, 10) };
}
