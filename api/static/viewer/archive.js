/* The archive pages' only script (no inline code: the CSP allows script-src 'self' only).
 *
 * Sign-in page: puts the browser's IANA time zone into the hidden field, so days and times are the reader's.
 * Channel page: "load older" (the next page of the timeline as an HTML fragment, with the next cursor on its
 * root), the side panel (a thread, or a message's edit history) and "load more replies". Fragments are HTML the
 * server rendered and escaped; they are parsed with DOMParser (scripts in them never run) and moved in as nodes.
 */
'use strict';

(() => {
  const tz = document.getElementById('tz');
  if (tz) {
    try {
      tz.value = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
    } catch (err) {
      tz.value = 'UTC';
    }
  }

  const channel = document.getElementById('channel');
  if (!channel) {
    // Pages without the panel (a user's recent messages, search results): a thread or an edit history opens the
    // message in its channel.
    document.addEventListener('click', (event) => {
      const target = event.target instanceof Element ? event.target : null;
      const button = target && target.closest('[data-thread-url], [data-history-url]');
      const time = button && button.closest('.message') && button.closest('.message').querySelector('a.time');
      if (time) {
        event.preventDefault();
        window.location.assign(time.href);
      }
    });
    return;
  }
  const timeline = document.getElementById('timeline');
  const olderButton = document.getElementById('load-older');
  const end = document.getElementById('timeline-end');
  const status = document.getElementById('status');
  const panel = document.getElementById('panel');
  const panelTitle = document.getElementById('panel-title');
  const panelBody = document.getElementById('panel-body');
  const includeDeleted = channel.dataset.includeDeleted === '1';

  function say(text, kind) {
    status.textContent = text;
    status.className = 'status' + (kind ? ' ' + kind : '');
  }

  /* GET a fragment: {ok, status, root} where root is the fragment's first element (or its error box). A 401
   * means the cookie is gone: back to the sign-in form, then to this page. */
  async function fragment(url) {
    let response;
    try {
      response = await fetch(url, {credentials: 'same-origin', headers: {Accept: 'text/html'}});
    } catch (err) {
      return {ok: false, status: 0, root: null, message: 'The server cannot be reached.'};
    }
    if (response.status === 401) {
      window.location.assign('/archive?next=' + encodeURIComponent(window.location.pathname + window.location.search));
      return {ok: false, status: 401, root: null, message: 'Signed out.'};
    }
    const doc = new DOMParser().parseFromString(await response.text(), 'text/html');
    const root = doc.body.firstElementChild;
    const message = root && root.classList.contains('fragment-error') ? root.textContent.trim()
      : response.status + ' ' + response.statusText;
    return {ok: response.ok && root !== null, status: response.status, root, message};
  }

  /* Append an older page: a day that continues the last one shown joins it (one separator per day). */
  function appendDays(root) {
    let added = 0;
    for (const section of Array.from(root.querySelectorAll('section.day'))) {
      const sections = timeline.querySelectorAll('section.day');
      const last = sections.length ? sections[sections.length - 1] : null;
      const items = Array.from(section.querySelectorAll('ol.messages > li'));
      added += items.length;
      if (last && last.dataset.day === section.dataset.day) {
        const list = last.querySelector('ol.messages');
        for (const item of items) list.appendChild(document.adoptNode(item));
      } else {
        timeline.appendChild(document.adoptNode(section));
      }
    }
    return added;
  }

  async function loadOlder() {
    const cursor = olderButton.dataset.cursor;
    if (!cursor) return;
    olderButton.disabled = true;
    say('Loading older messages…', 'info');
    let url = channel.dataset.olderUrl + '?cursor=' + encodeURIComponent(cursor);
    if (includeDeleted) url += '&include_deleted=1';
    const result = await fragment(url);
    if (!result.ok) {
      say('Could not load older messages: ' + result.message, 'error');
      olderButton.disabled = false;
      return;
    }
    const added = appendDays(result.root);
    const next = result.root.dataset.nextCursor || '';
    olderButton.dataset.cursor = next;
    olderButton.disabled = false;
    if (!next) {
      olderButton.hidden = true;
      end.hidden = false;
    }
    const empty = document.getElementById('timeline-empty');
    if (empty && added) empty.hidden = true;
    say(added ? '' : (next ? 'Only thread replies on that page; loading on…' : ''), added || !next ? '' : 'info');
    if (!added && next) loadOlder();  // a page of thread replies only (they live in their threads): go on
  }

  function select(item) {
    for (const old of document.querySelectorAll('.message.selected')) old.classList.remove('selected');
    if (item) item.classList.add('selected');
  }

  async function openPanel(title, url, item) {
    panel.hidden = false;
    document.body.classList.add('panel-open');
    panelTitle.textContent = title;
    panelBody.replaceChildren();
    const loading = document.createElement('p');
    loading.className = 'muted empty-thread';
    loading.textContent = 'Loading…';
    panelBody.appendChild(loading);
    select(item);
    const result = await fragment(url);
    panelBody.replaceChildren();
    if (result.root) {
      if (result.root.dataset.title) panelTitle.textContent = result.root.dataset.title;
      panelBody.appendChild(document.adoptNode(result.root));
    } else {
      const box = document.createElement('div');
      box.className = 'fragment-error';
      box.textContent = result.message;
      panelBody.appendChild(box);
    }
    panelTitle.focus();
  }

  function closePanel() {
    panel.hidden = true;
    document.body.classList.remove('panel-open');
    panelBody.replaceChildren();
    select(null);
  }

  async function moreReplies(button) {
    button.disabled = true;
    const result = await fragment(button.dataset.moreUrl);
    if (!result.ok) {
      button.disabled = false;
      button.textContent = 'Could not load more replies: ' + result.message;
      return;
    }
    const list = panelBody.querySelector('ol.thread-replies');
    for (const item of Array.from(result.root.querySelectorAll('ol.thread-replies > li'))) {
      list.appendChild(document.adoptNode(item));
    }
    const next = result.root.querySelector('.more-replies');
    if (next) button.replaceWith(document.adoptNode(next));
    else button.remove();
  }

  olderButton.addEventListener('click', loadOlder);
  document.getElementById('panel-close').addEventListener('click', closePanel);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !panel.hidden) closePanel();
  });
  document.addEventListener('click', (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    const thread = target.closest('[data-thread-url]');
    if (thread) {
      event.preventDefault();
      openPanel('Thread', thread.dataset.threadUrl, thread.closest('.message'));
      return;
    }
    const history = target.closest('[data-history-url]');
    if (history) {
      event.preventDefault();
      openPanel('Edit history', history.dataset.historyUrl, history.closest('.message'));
      return;
    }
    const more = target.closest('.more-replies');
    if (more) {
      event.preventDefault();
      moreReplies(more);
    }
  });
})();
