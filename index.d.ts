// The repository root installed from a git URL is the TypeScript client: npm installs a git
// dependency from its root only, so the root re-exports @spillway/client, which it bundles
// with @spillway/proto and @spillway/wire (see docs/sdk-typescript.md, "Installing").
export * from "@spillway/client";
