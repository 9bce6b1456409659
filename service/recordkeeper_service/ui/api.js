// The REST API of this service, called with the user's token (kept in sessionStorage: it lives
// as long as the tab and is never written to disk or sent anywhere but this origin).

const TOKEN_KEY = "recordkeeper.token";
const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.detail ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code ? body.code : "http_error";
    this.body = body || {};
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** One path segment, percent-encoded (references contain `@` and `:`). */
export function seg(value) {
  return encodeURIComponent(String(value));
}

/** Call `method path` under /api/v1; resolves to the JSON answer, rejects with ApiError. */
export async function api(path, { method = "GET", params, body } = {}) {
  const url = new URL(API + path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    payload = null;
  }
  if (!response.ok) throw new ApiError(response.status, payload);
  return payload;
}
