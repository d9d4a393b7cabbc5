import { describe, expect, it } from "vitest";
import { jsonShape } from "./json-shape.js";

describe("jsonShape", () => {
  it("sketches an object's keys in order with their types", () => {
    const value = JSON.parse(
      '{"id": 7, "name": "x", "ok": true, "none": null, "meta": {"a": 1}, "tags": ["a", "b"]}',
    );
    expect(jsonShape(value)).toBe(
      "{id: number, name: string, ok: boolean, none: null, meta: object, tags: [2 items]}",
    );
  });

  it("sketches an array of objects from the first item's keys", () => {
    const value = [
      { id: 1, name: "a" },
      { id: 2, name: "b", extra: true },
      { id: 3, name: "c" },
    ];
    expect(jsonShape(value)).toBe("[3 items of {id: number, name: string}]");
  });

  it("names the common item type, or mixed", () => {
    expect(jsonShape([1, 2, 3])).toBe("[3 items of number]");
    expect(jsonShape(["a"])).toBe("[1 item of string]");
    expect(jsonShape([null, null])).toBe("[2 items of null]");
    expect(jsonShape([[1], [2, 3]])).toBe("[2 items of array]");
    expect(jsonShape([1, "a", null])).toBe("[3 items of mixed]");
    expect(jsonShape([{ a: 1 }, [1]])).toBe("[2 items of mixed]");
    expect(jsonShape([])).toBe("[0 items]");
  });

  it("sketches scalars", () => {
    expect(jsonShape("hello world!")).toBe("string (12 chars)");
    expect(jsonShape("😀é")).toBe("string (2 chars)");
    expect(jsonShape(3.5)).toBe("number");
    expect(jsonShape(false)).toBe("boolean");
    expect(jsonShape(null)).toBe("null");
    expect(jsonShape({})).toBe("{}");
  });

  it("names nested values by type only, however deep", () => {
    const deep = { a: { b: { c: { d: [1, 2] } } }, list: [[{ x: 1 }]] };
    expect(jsonShape(deep)).toBe("{a: object, list: [1 item]}");
    expect(jsonShape([[[1]]])).toBe("[1 item of array]");
  });

  it("sketches more levels when asked", () => {
    const deep = { a: { b: { c: 1 } }, list: [{ x: 1 }] };
    expect(jsonShape(deep, 2)).toBe("{a: {b: object}, list: [1 item of {x: number}]}");
    expect(jsonShape(deep, 0)).toBe("object");
  });

  it("lists at most 20 keys then counts the rest", () => {
    const value: Record<string, number> = {};
    for (let i = 0; i < 25; i++) value[`k${i}`] = i;
    const shape = jsonShape(value);
    expect(shape.startsWith("{k0: number, k1: number,")).toBe(true);
    expect(shape).toContain("k19: number, … 5 more keys}");
    expect(shape).not.toContain("k20");
  });

  it("quotes keys that are not plain identifiers, keeping the sketch on one line", () => {
    expect(jsonShape({ "a b": 1, "x\ny": 2, ok_1: 3 })).toBe(
      '{"a b": number, "x\\ny": number, ok_1: number}',
    );
  });

  it("bounds the sketch at 400 characters, ending in an ellipsis", () => {
    const value: Record<string, string> = {};
    for (let i = 0; i < 20; i++) value[`${"k".repeat(40)}${i}`] = "v";
    const shape = jsonShape(value);
    expect(shape.length).toBe(400);
    expect(shape.endsWith("…")).toBe(true);
    expect(jsonShape(value)).toBe(shape);
  });
});
