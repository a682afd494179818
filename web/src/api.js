// The coordinator's API as the page uses it: DashboardService and
// AdminService over the Connect protocol's unary JSON form (the messages in
// protobuf's canonical JSON: lowerCamelCase names, int64 as strings, fields
// at their default left out) and the Server-Sent Events streams.
'use strict';
const ZS = {};

// An error of a call: Connect's code and message, and the HTTP status.
class CallError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}
ZS.CallError = CallError;

// POST /SERVICE/METHOD with `request`; the response message, or throws a
// CallError with the server's code and message.
ZS.call = async function (service, method, request, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token !== undefined) headers['Authorization'] = 'Bearer ' + token;
  const res = await fetch('/zshard.v1.' + service + '/' + method, {
    method: 'POST', headers, body: JSON.stringify(request || {}),
  });
  const text = await res.text();
  let body = {};
  try { body = text ? JSON.parse(text) : {}; } catch (e) { body = { message: text }; }
  if (!res.ok) throw new CallError(body.code || 'unknown', body.message || text, res.status);
  return body;
};
ZS.dash = (method, request) => ZS.call('DashboardService', method, request);

// Every page of GetPlan's pieces for `request`.
ZS.planPieces = async function (request) {
  let pieces = [];
  let token = '';
  for (let page = 0; page < 1000; ++page) {
    const r = await ZS.dash('GetPlan', Object.assign({}, request, { pageSize: 10000, pageToken: token }));
    pieces = pieces.concat(r.pieces || []);
    token = r.nextPageToken || '';
    if (!token) break;
  }
  return pieces;
};

// int64 fields arrive as strings, and fields at 0 are left out.
ZS.num = (v) => (v === undefined || v === null ? 0 : Number(v));

// Follows `path` (an SSE stream): `handlers[event](message)` per message;
// reconnects after errors (EventSource does, from the last event id).
ZS.follow = function (path, handlers, onState) {
  const es = new EventSource(path);
  for (const [event, fn] of Object.entries(handlers)) {
    es.addEventListener(event, (m) => fn(JSON.parse(m.data)));
  }
  es.onopen = () => onState && onState(true);
  es.onerror = () => onState && onState(false);
  return es;
};

ZS.bytes = function (n) {
  n = ZS.num(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
};

ZS.ago = function (ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  return (s / 3600).toFixed(1) + ' h';
};

// A colour per worker name, stable across reloads: FNV-1a, spread by the
// golden angle so that w0, w1, w2 differ at a glance.
ZS.colour = function (name) {
  let h = 0x811c9dc5;
  for (const c of String(name)) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return 'hsl(' + Math.round((h % 997) * 137.508) % 360 + ', 60%, 55%)';
};

ZS.el = function (tag, attrs, children) {
  const svg = ['svg', 'rect', 'line', 'text', 'g', 'path', 'title', 'defs', 'marker'].includes(tag);
  const e = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag)
                : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of [].concat(children || [])) {
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
};

// Replaces `table`'s rows: `head` names, `rows` arrays of cells.
ZS.table = function (table, head, rows) {
  table.replaceChildren(ZS.el('tr', {}, head.map((h) => ZS.el('th', {}, h))));
  for (const r of rows) {
    table.appendChild(ZS.el('tr', {}, r.map((c) => ZS.el('td', {}, c))));
  }
};
