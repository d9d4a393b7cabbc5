import { execFileSync } from "node:child_process";
import { type Browser, launch } from "puppeteer-core";

/**
 * chromiumPath finds the Chromium to drive: SPILLWAY_CHROMIUM, else `chromium` or
 * `chromium-browser` on PATH (scripts/install-chromium.sh installs Debian's). A missing browser
 * throws, naming the install script: the browser tests fail without one, never skip.
 */
export function chromiumPath(): string {
  const named = process.env.SPILLWAY_CHROMIUM;
  if (named !== undefined && named !== "") return named;
  for (const name of ["chromium", "chromium-browser"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    } catch {
      // Not this name; try the next.
    }
  }
  throw new Error(
    "no Chromium on PATH: run scripts/install-chromium.sh (or set SPILLWAY_CHROMIUM)",
  );
}

/**
 * launchChromium starts a headless Chromium through puppeteer-core (the CDP protocol), with
 * a window of `width` x `height` and, when asked, trusting any certificate (for a test's
 * self-signed one). The caller closes it.
 */
export function launchChromium(opts: {
  readonly ignoreCertificateErrors?: boolean;
  readonly width?: number;
  readonly height?: number;
}): Promise<Browser> {
  const width = opts.width ?? 1440;
  const height = opts.height ?? 900;
  return launch({
    executablePath: chromiumPath(),
    headless: true,
    // Root in a container has no user namespace sandbox to enter.
    args: [
      "--no-sandbox",
      "--disable-dev-shm-usage",
      "--disable-gpu",
      `--window-size=${width},${height}`,
      ...(opts.ignoreCertificateErrors === true ? ["--ignore-certificate-errors"] : []),
    ],
    defaultViewport: { width, height },
    acceptInsecureCerts: opts.ignoreCertificateErrors === true,
  });
}
