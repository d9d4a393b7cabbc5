import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import { createSpillwayWebClient, tokenStore } from "./client.js";
import { byId, el } from "./dom.js";
import { formatBytes, visibleText } from "./format.js";
import { createStatusLine } from "./status.js";
import { createViewer } from "./viewer.js";

/** Runs and outputs asked for per page. */
const pageSize = 100;

const client = createSpillwayWebClient();
const status = createStatusLine();
const viewer = createViewer(client, status);

const runsBody = byId<HTMLTableElement>("runs").tBodies[0] as HTMLTableSectionElement;
const runsMore = byId<HTMLButtonElement>("runs-more");
const outputsList = byId<HTMLUListElement>("outputs");
const outputsMore = byId<HTMLButtonElement>("outputs-more");
const outputsTitle = byId<HTMLHeadingElement>("outputs-title");
let runsToken = "";
let outputsToken = "";
let currentRun = "";

/**
 * One list (runs, or a run's outputs) loaded page by page. A fresh load supersedes any page
 * still in flight, whose answer is then dropped; a request for the next page while one is in
 * flight is ignored, as it would ask for the same page again.
 */
function createListLoads() {
  let generation = 0;
  let busy = false;
  return {
    /** Starts a load; returns undefined when a next page is already coming. */
    begin(more: boolean): (() => boolean) | undefined {
      if (more && busy) return undefined;
      const mine = ++generation;
      busy = true;
      return () => mine === generation;
    },
    /** Ends the load that `isCurrent` belongs to. */
    end(isCurrent: () => boolean): void {
      if (isCurrent()) busy = false;
    },
  };
}
const runsLoads = createListLoads();
const outputsLoads = createListLoads();

function when(ts: Timestamp | undefined): string {
  if (ts === undefined) return "—";
  return new Date(Number(ts.seconds) * 1000).toISOString().replace("T", " ").slice(0, 16);
}

function select(container: Element, selected: Element): void {
  for (const node of container.querySelectorAll(".selected")) node.classList.remove("selected");
  selected.classList.add("selected");
}

function runRow(run: RunInfo): HTMLTableRowElement {
  const shownId = visibleText(run.runId);
  const row = el("tr", { attrs: { "data-run": run.runId, title: shownId } }, [
    el("td", { text: shownId }),
    el("td", { text: run.outputCount.toString() }),
    el("td", { text: formatBytes(run.sizeBytes) }),
    el("td", { text: when(run.updateTime) }),
    el("td", { text: run.expireTime === undefined ? "never" : when(run.expireTime) }),
  ]);
  if (run.parentRunId !== "") {
    row.title = `${shownId} (forked from ${visibleText(run.parentRunId)})`;
  }
  row.addEventListener("click", () => {
    select(runsBody, row);
    void openRun(run.runId);
  });
  return row;
}

async function loadRuns(more: boolean): Promise<void> {
  const isCurrent = runsLoads.begin(more);
  if (isCurrent === undefined) return;
  if (!more) {
    runsToken = "";
    runsBody.replaceChildren();
  }
  status.busy("listing runs…");
  try {
    const page = await client.listRuns({ pageSize, pageToken: runsToken });
    if (!isCurrent()) return;
    runsBody.append(...page.runs.map(runRow));
    runsToken = page.nextPageToken;
    runsMore.hidden = runsToken === "";
    if (runsBody.childElementCount === 0) status.message("no runs stored for this tenant");
    else status.clear();
  } catch (err) {
    if (!isCurrent()) return;
    runsMore.hidden = true;
    if (ConnectError.from(err).code === Code.Unimplemented) {
      status.message("this server cannot list runs (UNIMPLEMENTED): open a run by its id");
    } else {
      status.error(err);
    }
  } finally {
    runsLoads.end(isCurrent);
  }
}

function outputItem(runId: string, a: ResultAttachment): HTMLLIElement {
  const preview = a.preview;
  const previewText =
    preview === undefined
      ? ""
      : preview.omittedBytes > 0n && preview.tail !== ""
        ? `${preview.head}\n… ${formatBytes(preview.omittedBytes)} omitted …\n${preview.tail}`
        : preview.head;
  const item = el("li", { attrs: { "data-handle": a.handle } }, [
    el("strong", { text: visibleText(a.name || a.handle) }),
    el("div", {
      className: "meta",
      text: [
        visibleText(a.handle),
        visibleText(a.contentType || "no type"),
        formatBytes(a.sizeBytes),
        a.lineCount === 1n ? "1 line" : `${a.lineCount} lines`,
        ...(a.truncated ? ["truncated"] : []),
      ].join(" · "),
    }),
    el("pre", { className: "preview", text: previewText }),
  ]);
  item.addEventListener("click", () => {
    select(outputsList, item);
    viewer.open(runId, a);
  });
  return item;
}

async function openRun(runId: string, more = false): Promise<void> {
  const isCurrent = outputsLoads.begin(more);
  if (isCurrent === undefined) return;
  if (!more) {
    currentRun = runId;
    outputsToken = "";
    outputsList.replaceChildren();
    outputsTitle.textContent = `Outputs of ${visibleText(runId)}`;
    viewer.clear();
  }
  status.busy("listing outputs…");
  try {
    const page = await client.listToolOutputs({ runId, pageSize, pageToken: outputsToken });
    if (!isCurrent()) return;
    outputsList.append(...page.attachments.map((a) => outputItem(runId, a)));
    outputsToken = page.nextPageToken;
    outputsMore.hidden = outputsToken === "";
    if (outputsList.childElementCount === 0) status.message(`run ${runId} holds no outputs`);
    else status.clear();
  } catch (err) {
    if (isCurrent()) status.error(err);
  } finally {
    outputsLoads.end(isCurrent);
  }
}

/**
 * Drops everything the page shows of a tenant: the runs, the open run's outputs (and a page of
 * them still coming) and the viewer. Another token is another tenant, whose page must show
 * nothing of the last one's.
 */
function forgetShown(): void {
  const superseded = outputsLoads.begin(false);
  if (superseded !== undefined) outputsLoads.end(superseded);
  currentRun = "";
  outputsToken = "";
  runsBody.replaceChildren();
  outputsList.replaceChildren();
  outputsMore.hidden = true;
  outputsTitle.textContent = "Outputs";
  viewer.clear();
}

const tokenInput = byId<HTMLInputElement>("token");
tokenInput.value = tokenStore.get();
byId<HTMLFormElement>("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = tokenInput.value.trim();
  if (token !== tokenStore.get()) forgetShown();
  tokenStore.set(token);
  void loadRuns(false);
});
byId("token-clear").addEventListener("click", () => {
  tokenInput.value = "";
  tokenStore.set("");
  forgetShown();
  status.message("token forgotten");
});
byId<HTMLFormElement>("run-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const runId = byId<HTMLInputElement>("run-id").value.trim();
  if (runId !== "") void openRun(runId);
});
byId("runs-reload").addEventListener("click", () => void loadRuns(false));
runsMore.addEventListener("click", () => void loadRuns(true));
outputsMore.addEventListener("click", () => void openRun(currentRun, true));
void loadRuns(false);
