import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { freePort } from "./free-port.js";
import { waitFor } from "./wait-for.js";

/** NginxOptions configure startNginx. */
export interface NginxOptions {
  /** Spillway replicas as `host:port`, all of them in one round-robin upstream. */
  readonly upstreams: readonly string[];
}

/** RunningNginx is a real nginx process proxying gRPC to the replicas, owned by the caller. */
export interface RunningNginx {
  /** h2c base URL of the proxy, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The complete nginx.conf it runs with. */
  readonly config: string;
  /** Access log path; each line is `<method> <uri> <status> <upstream addresses tried>`. */
  readonly accessLog: string;
  /** stop shuts nginx down (SIGTERM, then SIGKILL of its process group) and deletes its dir; idempotent. */
  stop(): Promise<void>;
}

/**
 * nginxGrpcProxyConfig renders the `http`-level part of the deployment config: an upstream of the
 * replicas with idle keepalive connections, and a cleartext HTTP/2 (h2c) server on `listen` that
 * passes every gRPC call to it. It is the config docs/operations.md documents, byte for byte;
 * nginx 1.22 syntax (`listen ... http2`, since `http2 on` arrived in 1.25.1).
 */
export function nginxGrpcProxyConfig(upstreams: readonly string[], listen: string): string {
  if (upstreams.length === 0) {
    throw new ConnectError("nginxGrpcProxyConfig: no upstreams", Code.InvalidArgument);
  }
  const servers = upstreams.map((u) => `    server ${u} max_fails=1 fail_timeout=5s;\n`).join("");
  return `upstream spillway {
${servers}    keepalive 32;
    keepalive_requests 100000;
    keepalive_timeout 60s;
}

server {
    listen ${listen} http2;
    # Offloads are bounded by the server's max_blob_bytes, not by the proxy.
    client_max_body_size 0;
    client_body_timeout 300s;
    keepalive_requests 100000;
    keepalive_timeout 300s;
    http2_max_concurrent_streams 256;

    location / {
        grpc_pass grpc://spillway;
        grpc_socket_keepalive on;
        grpc_connect_timeout 2s;
        grpc_read_timeout 300s;
        grpc_send_timeout 300s;
        # Only a call that never reached a replica moves on: POST is non-idempotent to nginx.
        grpc_next_upstream error timeout http_502 http_503;
        grpc_next_upstream_tries 3;
        grpc_next_upstream_timeout 10s;
    }
}
`;
}

/**
 * startNginx runs the system nginx (`nginx` on PATH, or /usr/sbin/nginx) in the foreground on
 * a free loopback port with nginxGrpcProxyConfig, keeping its pid, logs and temp files in a
 * private temp dir (nothing under /etc or /var), and resolves once the port accepts TCP
 * connections. A start that loses its port to another process is retried on a fresh one.
 */
export async function startNginx(opts: NginxOptions): Promise<RunningNginx> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (err) {
      const portTaken = /in use|EADDRINUSE/i.test(ConnectError.from(err).rawMessage);
      if (!portTaken || attempt >= 3) throw err;
    }
  }
}

async function startOnce(opts: NginxOptions): Promise<RunningNginx> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "spillway-nginx-"));
  // Run as root, nginx's workers drop to "nobody" and must reach the temp paths inside dir.
  await chmod(dir, 0o755);
  const config = `worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;

events {
    worker_connections 1024;
}

http {
    log_format upstreams '$request_method $uri $status $upstream_addr';
    access_log ${join(dir, "access.log")} upstreams;
    client_body_temp_path ${join(dir, "client_body")};
    proxy_temp_path ${join(dir, "proxy")};
    fastcgi_temp_path ${join(dir, "fastcgi")};
    uwsgi_temp_path ${join(dir, "uwsgi")};
    scgi_temp_path ${join(dir, "scgi")};

${indent(nginxGrpcProxyConfig(opts.upstreams, `127.0.0.1:${port}`))}}
`;
  const confPath = join(dir, "nginx.conf");
  await writeFile(confPath, config);
  const child = spawn(
    nginxBinary(),
    ["-p", `${dir}/`, "-c", confPath, "-e", join(dir, "error.log"), "-g", "daemon off;"],
    {
      cwd: dir,
      stdio: ["ignore", "ignore", "ignore"],
      detached: true,
      env: { ...process.env, PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin` },
    },
  );
  const exited = once(child, "exit");
  let spawnError: Error | undefined;
  child.once("error", (err) => {
    spawnError = err;
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await terminate(child, exited);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(() => accepts(port), 15_000, {
      abortReason: () => {
        if (spawnError !== undefined) return `cannot run nginx: ${spawnError.message}`;
        if (child.exitCode !== null || child.signalCode !== null) {
          return `nginx exited (${child.exitCode ?? child.signalCode}) before it listened`;
        }
        return undefined;
      },
    });
  } catch (err) {
    const log = await readFile(join(dir, "error.log"), "utf8").catch(() => "(no error log)");
    await stop();
    const cause = ConnectError.from(err);
    throw new ConnectError(`${cause.rawMessage}\n--- nginx error.log ---\n${log}`, cause.code);
  }
  return { url: `http://127.0.0.1:${port}`, config, accessLog: join(dir, "access.log"), stop };
}

function nginxBinary(): string {
  return process.env.NGINX_BINARY ?? "nginx";
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => (line === "" ? line : `    ${line}`))
    .join("\n");
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", reject);
  });
}

async function terminate(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.pid === undefined) return;
  if (child.exitCode === null && child.signalCode === null) {
    killGroup(child.pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(child.pid ?? 0, "SIGKILL"), 5_000);
    try {
      await exited;
    } finally {
      clearTimeout(timer);
    }
  }
  // Workers that outlived their master would keep the port; the group takes them along.
  killGroup(child.pid, "SIGKILL");
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}
