/* Shared helpers of the tagging pages: calls to the REST API (the HttpOnly cookie authenticates them), DOM
 * building that only ever sets text (archived text is data, never markup), and formatting. */
'use strict';

const Tagging = (() => {
  const app = document.getElementById('app');
  const project = app.dataset.project;
  const base = '/tagging/projects/' + encodeURIComponent(project);

  /* The page's CSRF token (api/csrf.py): sent as X-CSRF-Token on every call; the server checks it on those that
   * change something. The call also keeps the real Origin (referrerPolicy 'same-origin': never `Origin: null`). */
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrfToken = csrfMeta ? csrfMeta.content : '';

  /* One API call on the project (path: '/next', '/stats', ...): resolves to {ok, status, data, message}; never
   * throws (a network error is status 0). */
  async function api(method, path, body) {
    const options = {method, credentials: 'same-origin', referrerPolicy: 'same-origin',
                     headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken}};
    if (body !== undefined) options.body = JSON.stringify(body);
    let response;
    try {
      response = await fetch(base + path, options);
    } catch (err) {
      return {ok: false, status: 0, data: null, message: 'the server cannot be reached (' + err.message + ')'};
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    if (response.status === 401) {
      // The token was replaced or the cookie is gone: signing in again is the only way on.
      window.location.assign('/tagging');
    }
    const message = data && typeof data.message === 'string' ? data.message : response.statusText;
    return {ok: response.ok, status: response.status, data, message};
  }

  /* el('li', {className: 'x', dataset: {seq: 3}}, 'text', childNode): children are text or nodes. */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === 'dataset') {
        for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
      } else if (key === 'className') {
        node.className = value;
      } else if (key in node && typeof value !== 'string') {
        node[key] = value;
      } else {
        node.setAttribute(key, String(value));
      }
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function setText(id, value) {
    document.getElementById(id).textContent = value === null || value === undefined ? '' : String(value);
  }

  /* The status line of a page: kind is 'ok', 'error', 'info' or '' (cleared). */
  function status(kind, text) {
    const node = document.getElementById('status');
    if (!node) return;
    node.textContent = text || '';
    node.className = 'status' + (kind ? ' ' + kind : '');
  }

  function errorText(result) {
    if (result.status === 0) return result.message;
    return result.status + ': ' + (result.message || 'request failed');
  }

  /* "2026-03-01 14:02 UTC" from an ISO time (the archive's times are UTC). */
  function formatTime(iso) {
    if (!iso) return '';
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    return date.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }

  function formatSeconds(seconds) {
    if (seconds === null || seconds === undefined) return '–';
    if (seconds < 60) return seconds.toFixed(1) + ' s';
    const m = Math.floor(seconds / 60);
    const s = Math.round(seconds % 60);
    return m + ' min ' + String(s).padStart(2, '0') + ' s';
  }

  /* The keyword the server will store: NFKC, case-folded, inner whitespace collapsed (effort.normalise_keyword). */
  function normaliseKeyword(text) {
    return text.normalize('NFKC').toLowerCase().normalize('NFKC').split(/\s+/).filter(Boolean).join(' ');
  }

  /* True when a key press belongs to a field the person is typing in (letters must not trigger shortcuts). */
  function typing(event) {
    const target = event.target;
    if (!(target instanceof HTMLElement)) return false;
    if (target.isContentEditable || target.tagName === 'TEXTAREA' || target.tagName === 'SELECT') return true;
    return target.tagName === 'INPUT' && !['checkbox', 'radio', 'button', 'submit'].includes(target.type);
  }

  function chip(text, className) {
    return el('li', {className: 'chip' + (className ? ' ' + className : '')}, text);
  }

  return {project, base, api, el, setText, status, errorText, formatTime, formatSeconds, normaliseKeyword,
          typing, chip};
})();
