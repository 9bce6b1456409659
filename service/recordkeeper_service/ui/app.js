// The single page: session (token login), routing by `#/…` fragments, and the page frame.
import { ApiError, api, setToken, token } from "./api.js";
import { clear, errorBox, h } from "./dom.js";
import * as data from "./pages-data.js";
import * as lineage from "./pages-lineage.js";
import * as runs from "./pages-runs.js";

/** Who is signed in: {name, scope, token} from GET /whoami. */
export const session = { who: null };

export function canWrite() {
  return Boolean(session.who) && (session.who.scope === "write" || session.who.scope === "admin");
}

const ROUTES = [
  [/^\/?$/, () => data.datasetsPage],
  [/^\/datasets\/([^/]+)$/, () => data.datasetPage],
  [/^\/versions\/([^/]+)$/, () => data.versionPage],
  [/^\/compare$/, () => data.comparePage],
  [/^\/models$/, () => lineage.modelsPage],
  [/^\/models\/([^/]+)$/, () => lineage.modelPage],
  [/^\/models\/([^/]+)\/checkpoints\/([^/]+)$/, () => lineage.checkpointPage],
  [/^\/models\/([^/]+)\/runs\/([^/]+)$/, () => runs.runPage],
  [/^\/impact$/, () => lineage.impactPage],
  [/^\/graph$/, () => lineage.graphPage],
];

const main = () => document.getElementById("main");
let cleanup = null;

function parseHash() {
  // pages are "#/…"; anything else (the skip link's "#main") shows the first page
  const raw = window.location.hash.startsWith("#/") ? window.location.hash.slice(1) : "/";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

/** A fragment that names no page properly: shown as what it is, never as a script error. */
class BadLink extends Error {
  constructor(message) {
    super(message);
    this.code = "malformed_link";
  }
}

function shownHash() {
  const text = window.location.hash;
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

function decodeAll(parts) {
  return parts.map((part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new BadLink(`The link ${shownHash()} is malformed: “${part.slice(0, 80)}” holds a broken %-escape. Check that the link was copied completely.`);
    }
  });
}

/** A page that failed on its own (not an API answer): a clear message, not the script's. */
function unexpected(error) {
  const shown = new BadLink(
    `This page could not be shown for the link ${shownHash()}: a part of it is missing or malformed. Open the page again from the menu, or check the link.`,
  );
  shown.cause = error;
  return shown;
}

async function route() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const { path, query } = parseHash();
  for (const link of document.querySelectorAll("nav a")) {
    const here = link.getAttribute("href").slice(1);
    link.toggleAttribute("aria-current", here === "/" ? path === "/" || path.startsWith("/datasets") || path.startsWith("/versions") : path.startsWith(here));
  }
  const target = main();
  clear(target, h("p", { class: "loading" }, "Loading…"));
  target.setAttribute("aria-busy", "true");
  try {
    for (const [pattern, page] of ROUTES) {
      const match = path.match(pattern);
      if (match) {
        const args = decodeAll(match.slice(1));
        const result = await page()(target, args, query, { canWrite: canWrite() });
        if (typeof result === "function") cleanup = result;
        return;
      }
    }
    clear(target, h("h1", {}, "Not found"), h("p", {}, `No page at ${path}.`));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      showLogin(error.message);
      return;
    }
    clear(target, errorBox(error instanceof ApiError || error instanceof BadLink ? error : unexpected(error)));
  } finally {
    target.removeAttribute("aria-busy");
    target.focus({ preventScroll: true });
    setTitle();
  }
}

/** The tab's title names the page: its heading (or the error shown), then the service. */
function setTitle() {
  const heading = main().querySelector("h1");
  const error = main().querySelector("[data-testid=error] strong");
  const text = heading ? heading.textContent.trim() : error ? `Error: ${error.textContent}` : "";
  document.title = text ? `${text} · recordkeeper` : "recordkeeper";
}

function renderSession() {
  const box = document.getElementById("session");
  if (!session.who) {
    clear(box);
    return;
  }
  const who = session.who;
  clear(
    box,
    h("span", { "data-testid": "who" }, who.name, " ", h("span", { class: `badge badge-scope` }, who.scope)),
    who.token ? h("button", { type: "button", class: "link-button", onclick: logout }, "Sign out") : null,
  );
}

function logout() {
  setToken(null);
  session.who = null;
  renderSession();
  showLogin("Signed out.");
}

function showLogin(message) {
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    required: true,
    placeholder: "rk_…",
    "aria-describedby": "token-help",
  });
  const status = h("p", { class: "muted", role: "status", "data-testid": "login-status" }, message || "");
  const form = h(
    "form",
    {
      class: "login",
      "data-testid": "login",
      onsubmit: async (event) => {
        event.preventDefault();
        setToken(input.value.trim());
        try {
          session.who = await api("/whoami");
        } catch (error) {
          setToken(null);
          status.textContent = error.message;
          return;
        }
        renderSession();
        route();
      },
    },
    h("h1", {}, "Sign in"),
    h("label", { for: "token" }, "API token"),
    input,
    h(
      "p",
      { id: "token-help", class: "muted" },
      "A token from `recordkeeper token create`. It is kept in this tab only (sessionStorage).",
    ),
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  clear(main(), form);
  setTitle();
  input.focus();
}

async function start() {
  try {
    session.who = await api("/whoami");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const refused = Boolean(token());
      setToken(null);
      showLogin(refused ? "That token was refused; sign in again." : "");
      return;
    }
    clear(main(), errorBox(error));
    return;
  }
  renderSession();
  route();
}

window.addEventListener("hashchange", () => {
  // "#main" (the skip link) and other in-page anchors are not pages
  const hash = window.location.hash;
  if (session.who && (hash === "" || hash.startsWith("#/"))) route();
});
start();
