import { create } from "@bufbuild/protobuf";
import { Code, createContextValues, type HandlerContext } from "@connectrpc/connect";
import {
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { describe, expect, it } from "vitest";
import { createHealthState, type HealthState } from "./health.js";
import { peerKey } from "./peer-key.js";

const request = (service: string) => create(HealthCheckRequestSchema, { service });
const context = () =>
  ({ signal: new AbortController().signal, values: createContextValues() }) as HandlerContext;

/** Opens a Watch of "" on `health` as `peer`; abort() ends it as a client leaving would. */
function openWatch(health: HealthState, peer = "unknown") {
  const controller = new AbortController();
  const watch = health.service.watch?.(request(""), {
    signal: controller.signal,
    values: createContextValues().set(peerKey, peer),
  } as HandlerContext);
  if (watch === undefined) throw new Error("no watch");
  return { stream: watch[Symbol.asyncIterator](), controller };
}

describe("health state", () => {
  it("is NOT_SERVING for every service while any reason is set", async () => {
    const health = createHealthState(["spillway.v1.SpillwayService"]);
    const check = async (service: string) =>
      (await health.service.check?.(request(service), context()))?.status;
    expect(await check("")).toBe(ServingStatus.SERVING);
    health.setUnready("store", true);
    health.setUnready("draining", true);
    health.setUnready("store", false);
    expect(await check("")).toBe(ServingStatus.NOT_SERVING);
    expect(await check("spillway.v1.SpillwayService")).toBe(ServingStatus.NOT_SERVING);
    health.setUnready("draining", false);
    expect(await check("spillway.v1.SpillwayService")).toBe(ServingStatus.SERVING);
    await expect(check("other")).rejects.toMatchObject({ code: Code.NotFound });
  });

  it("streams a change made while the watcher was still taking the previous status", async () => {
    const health = createHealthState([]);
    const watch = health.service.watch?.(request(""), context());
    if (watch === undefined) throw new Error("no watch");
    const stream = watch[Symbol.asyncIterator]();
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVING);
    // The watcher has not asked for its next status yet when this changes.
    health.setUnready("draining", true);
    expect((await stream.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
    health.endWatches();
    expect((await stream.next()).done).toBe(true);
  });

  it("refuses a Watch over its bound and takes one again once a watcher leaves", async () => {
    const health = createHealthState([], { maxWatches: 2 });
    const open = () => openWatch(health);
    const first = open();
    const second = open();
    expect((await first.stream.next()).value?.status).toBe(ServingStatus.SERVING);
    expect((await second.stream.next()).value?.status).toBe(ServingStatus.SERVING);
    await expect(open().stream.next()).rejects.toMatchObject({
      code: Code.ResourceExhausted,
      rawMessage:
        "2 health Watch streams are open on this server process, the most it keeps, and this peer holds as many as any other; call Check instead",
    });
    // A Check is never refused for it.
    expect((await health.service.check?.(request(""), context()))?.status).toBe(
      ServingStatus.SERVING,
    );
    first.controller.abort();
    expect((await first.stream.next()).done).toBe(true);
    expect((await open().stream.next()).value?.status).toBe(ServingStatus.SERVING);
  });

  it("lets a peer watch when another holds every Watch, ending one of the hog's newest", async () => {
    const health = createHealthState([], { maxWatches: 4 });
    const hog = Array.from({ length: 4 }, () => openWatch(health, "10.0.0.66"));
    for (const w of hog) expect((await w.stream.next()).value?.status).toBe(ServingStatus.SERVING);
    // The hog cannot make room for itself.
    await expect(openWatch(health, "10.0.0.66").stream.next()).rejects.toMatchObject({
      code: Code.ResourceExhausted,
    });
    const balancer = openWatch(health, "10.0.0.1");
    expect((await balancer.stream.next()).value?.status).toBe(ServingStatus.SERVING);
    await expect(hog[3]?.stream.next()).rejects.toMatchObject({
      code: Code.ResourceExhausted,
      rawMessage:
        "ended to make room for another peer's health Watch: 4 are open on this server process, the most it keeps, and this peer holds the most",
    });
    // A second balancer stream takes another of the hog's; a third would leave it no fewer.
    const second = openWatch(health, "10.0.0.1");
    expect((await second.stream.next()).value?.status).toBe(ServingStatus.SERVING);
    await expect(openWatch(health, "10.0.0.1").stream.next()).rejects.toMatchObject({
      code: Code.ResourceExhausted,
    });
    // The balancer's streams still see a change; the hog's two survivors too.
    health.setUnready("draining", true);
    for (const w of [balancer, second, hog[0], hog[1]]) {
      expect((await w?.stream.next())?.value?.status).toBe(ServingStatus.NOT_SERVING);
    }
  });
});
