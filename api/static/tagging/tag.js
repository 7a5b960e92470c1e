/* The tagger's page: the held item (POST next gives the caller's unfinished item first, so a reload shows the
 * same one), category/subcategory pickers, keywords with completion, submit/skip/next, the lease countdown and
 * keyboard shortcuts. Every archived text is set with textContent. */
'use strict';

(() => {
  const {api, el, setText, status, errorText, formatTime, normaliseKeyword, typing} = Tagging;
  const $ = (id) => document.getElementById(id);
  const form = $('tag-form');
  const card = $('item-card');
  const keywordInput = $('keyword-input');
  const suggestionList = $('keyword-suggestions');
  const MAX_KEYWORDS = 20;
  const MAX_KEYWORD_LENGTH = 64;

  const state = {
    item: null,        // the item as the API last returned it
    finished: true,    // nothing held: submitted, skipped, reported, lost, or no item at all
    busy: false,       // a request is on its way (buttons wait for it)
    keywords: [],      // chosen keywords, normalised, in the order chosen
    suggestions: [],
    highlighted: -1,
    completionRequest: 0,
    debounce: null,
  };

  // -- showing the item ------------------------------------------------------------------------------------

  function checkboxes(name) {
    return Array.from(form.querySelectorAll(`input[name="${name}"]`));
  }

  function chosen(name) {
    return checkboxes(name).filter((box) => box.checked).map((box) => box.value);
  }

  function showEmpty(text) {
    state.item = null;
    state.finished = true;
    card.dataset.seq = '';
    card.classList.remove('is-missing');
    setText('item-seq', '—');
    setText('item-status', '');
    $('item-status').className = 'badge';
    $('item-body').hidden = true;
    $('item-empty').hidden = false;
    setText('item-empty', text);
    resetForm([], [], []);
    update();
  }

  function showItem(item) {
    const source = item.source || {missing: true, thread: []};
    state.item = item;
    state.finished = item.status !== 'InProgress';
    card.dataset.seq = item.seq;
    setText('item-seq', '#' + item.seq);
    showStatus(item.status);
    $('item-empty').hidden = true;
    $('item-body').hidden = false;
    $('item-author-row').hidden = !source.author;  // a missing source has neither author nor time
    setText('item-author', source.author);
    $('item-time-row').hidden = !source.time;
    setText('item-time', formatTime(source.time));
    $('item-time').title = source.time || '';
    $('item-channel-row').hidden = !source.channel;
    setText('item-channel', source.channel ? '#' + source.channel : '');
    const thread = source.thread || [];
    setText('item-kind', source.kind === 'slack' ? (thread.length ? 'Slack reply in a thread' : 'Slack message')
      : source.kind === 'network' ? 'Network post' : '');
    const list = $('thread-list');
    list.replaceChildren(...thread.map((m) => el('li', {},
      el('div', {className: 'thread-meta'}, el('strong', {}, m.author || 'unknown'), ' · ', formatTime(m.time)),
      el('div', {className: 'thread-text'}, m.text || ''))));
    $('item-thread').hidden = thread.length === 0;
    card.classList.toggle('is-missing', Boolean(source.missing));
    $('item-missing').hidden = !source.missing;
    $('item-text').hidden = Boolean(source.missing);
    setText('item-text', source.missing ? '' : source.text);
    resetForm(item.categories || [], item.subcategories || [], item.keywords || []);
    tick();
    update();
  }

  function showStatus(value) {
    const badge = $('item-status');
    badge.textContent = value || '';
    badge.className = 'badge status-' + String(value || '').toLowerCase().replace(/\s+/g, '-');
  }

  function resetForm(categories, subcategories, keywords) {
    for (const box of checkboxes('category')) box.checked = categories.includes(box.value);
    for (const box of checkboxes('subcategory')) box.checked = subcategories.includes(box.value);
    state.keywords = keywords.slice();
    keywordInput.value = '';
    renderChips();
    hideSuggestions();
  }

  /* Buttons and pickers follow the state: only a held, present item can be tagged. */
  function update() {
    const live = Boolean(state.item) && !state.finished;
    const missing = live && Boolean(state.item.source && state.item.source.missing);
    $('submit-button').disabled = !live || missing || state.busy;
    $('skip-button').disabled = !live || state.busy;
    $('next-button').disabled = live || state.busy;
    $('report-missing').disabled = !live || state.busy;
    for (const id of ['categories', 'subcategories', 'keywords']) $(id).disabled = !live || missing;
    form.classList.toggle('locked', !live || missing);
  }

  function tick() {
    const lease = $('lease');
    const until = state.item && !state.finished ? Date.parse(state.item.lease_until) : NaN;
    if (Number.isNaN(until)) {
      lease.textContent = '--:--';
      lease.className = 'lease idle';
      return;
    }
    const left = Math.floor((until - Date.now()) / 1000);
    if (left <= 0) {
      lease.textContent = 'lease expired';
      lease.className = 'lease expired';
      return;
    }
    lease.textContent = String(Math.floor(left / 60)).padStart(2, '0') + ':' + String(left % 60).padStart(2, '0');
    lease.className = 'lease' + (left < 60 ? ' warn' : '');
  }

  // -- the workflow ----------------------------------------------------------------------------------------

  async function call(method, path, body) {
    state.busy = true;
    update();
    try {
      return await api(method, path, body);
    } finally {
      state.busy = false;
      update();
    }
  }

  async function next(keepStatus) {
    if (state.busy || (state.item && !state.finished)) return;
    const result = await call('POST', '/next');
    if (!result.ok) {
      showEmpty('No item could be loaded.');
      status('error', errorText(result));
      return;
    }
    if (!keepStatus) status('', '');
    if (result.data.item) {
      showItem(result.data.item);
    } else {
      showEmpty(result.data.reason || 'No item is waiting.');
    }
  }

  async function submit() {
    const item = state.item;
    if (!item || state.finished || state.busy || (item.source && item.source.missing)) return;
    addKeyword(keywordInput.value);  // a keyword typed but not yet added counts too
    const body = {lease_id: item.lease_id, categories: chosen('category'), subcategories: chosen('subcategory'),
                  keywords: state.keywords.slice()};
    const result = await call('POST', `/items/${item.seq}/submit`, body);
    if (result.ok) {
      state.item = Object.assign({}, result.data.item, {source: item.source});  // a submit answers no source
      state.finished = true;
      showStatus(state.item.status);
      const parts = [...body.categories, ...body.subcategories].join(', ') || 'no category';
      status('ok', `Submitted item #${item.seq} (${parts}). Press N or Next for the next item.`);
      $('next-button').focus();
    } else if (result.status === 409) {
      // The lease is gone (expired and taken, or an admin acted): nothing more to do with this item.
      state.finished = true;
      showStatus('Lease lost');
      status('error', `${errorText(result)}. Press N or Next for another item.`);
    } else {
      status('error', errorText(result));
    }
    tick();
    update();
  }

  async function skip() {
    const item = state.item;
    if (!item || state.finished || state.busy) return;
    const result = await call('POST', `/items/${item.seq}/skip`, {lease_id: item.lease_id});
    if (!result.ok) {
      if (result.status === 409) state.finished = true;
      status('error', errorText(result));
      update();
      return;
    }
    state.finished = true;
    status('info', `Skipped item #${item.seq}: it goes back to the queue.`);
    await next(true);
  }

  async function reportMissing() {
    const item = state.item;
    if (!item || state.finished || state.busy) return;
    const result = await call('POST', `/items/${item.seq}/missing`, {lease_id: item.lease_id});
    if (result.ok) {
      state.item = result.data.item;
      state.finished = true;
      showStatus(state.item.status);
      status('ok', `Reported item #${item.seq} as source missing. Press N or Next for the next item.`);
    } else {
      if (result.status === 409) state.finished = true;
      status('error', errorText(result));
    }
    tick();
    update();
  }

  // -- keywords ----------------------------------------------------------------------------------------------

  function renderChips() {
    $('keyword-chips').replaceChildren(...state.keywords.map((word) => {
      const remove = el('button', {type: 'button', className: 'chip-remove', title: 'Remove ' + word,
                                   'aria-label': 'Remove keyword ' + word}, '×');
      remove.addEventListener('click', () => {
        state.keywords = state.keywords.filter((k) => k !== word);
        renderChips();
        keywordInput.focus();
      });
      return el('li', {className: 'chip', dataset: {keyword: word}}, el('span', {}, word), remove);
    }));
  }

  function addKeyword(text) {
    const word = normaliseKeyword(text || '');
    keywordInput.value = '';
    hideSuggestions();
    if (!word) return;
    if (word.length > MAX_KEYWORD_LENGTH) {
      status('error', `A keyword has at most ${MAX_KEYWORD_LENGTH} characters.`);
      return;
    }
    if (state.keywords.includes(word)) return;
    if (state.keywords.length >= MAX_KEYWORDS) {
      status('error', `At most ${MAX_KEYWORDS} keywords per item.`);
      return;
    }
    state.keywords.push(word);
    renderChips();
  }

  function hideSuggestions() {
    state.suggestions = [];
    state.highlighted = -1;
    suggestionList.replaceChildren();
    suggestionList.hidden = true;
    keywordInput.removeAttribute('aria-activedescendant');
  }

  function renderSuggestions() {
    suggestionList.replaceChildren(...state.suggestions.map((word, i) => {
      const option = el('li', {role: 'option', id: 'suggestion-' + i, className: i === state.highlighted ? 'active' : '',
                               'aria-selected': String(i === state.highlighted), dataset: {keyword: word}}, word);
      option.addEventListener('mousedown', (event) => event.preventDefault());  // keep the focus in the field
      option.addEventListener('click', () => {
        addKeyword(word);
        keywordInput.focus();
      });
      return option;
    }));
    suggestionList.hidden = state.suggestions.length === 0;
    if (state.highlighted >= 0) keywordInput.setAttribute('aria-activedescendant', 'suggestion-' + state.highlighted);
    else keywordInput.removeAttribute('aria-activedescendant');
  }

  async function complete() {
    const prefix = normaliseKeyword(keywordInput.value);
    if (prefix.length < 2) {
      hideSuggestions();
      return;
    }
    const ticket = ++state.completionRequest;
    const result = await api('GET', `/keywords?prefix=${encodeURIComponent(prefix)}&limit=8`);
    if (ticket !== state.completionRequest) return;  // a later keystroke asked again: its answer wins
    if (!result.ok) {
      hideSuggestions();
      return;
    }
    state.suggestions = (result.data.keywords || []).filter((k) => !state.keywords.includes(k));
    state.highlighted = -1;
    renderSuggestions();
  }

  keywordInput.addEventListener('input', () => {
    clearTimeout(state.debounce);
    state.debounce = setTimeout(complete, 150);
  });

  keywordInput.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      addKeyword(state.highlighted >= 0 ? state.suggestions[state.highlighted] : keywordInput.value);
    } else if (event.key === ',') {
      event.preventDefault();
      addKeyword(keywordInput.value);
    } else if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      if (!state.suggestions.length) return;
      event.preventDefault();
      const step = event.key === 'ArrowDown' ? 1 : -1;
      state.highlighted = (state.highlighted + step + state.suggestions.length + 1) % (state.suggestions.length + 1);
      if (state.highlighted === state.suggestions.length) state.highlighted = -1;
      renderSuggestions();
    } else if (event.key === 'Backspace' && keywordInput.value === '' && state.keywords.length) {
      state.keywords.pop();
      renderChips();
    } else if (event.key === 'Escape') {
      hideSuggestions();
      keywordInput.blur();
    }
  });

  keywordInput.addEventListener('blur', () => setTimeout(hideSuggestions, 150));

  // -- buttons and shortcuts -------------------------------------------------------------------------------

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit();
  });
  $('skip-button').addEventListener('click', skip);
  $('next-button').addEventListener('click', () => next(false));
  $('report-missing').addEventListener('click', reportMissing);

  document.addEventListener('keydown', (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === 'Enter') {
      event.preventDefault();
      submit();
      return;
    }
    if (event.altKey && !event.ctrlKey && !event.metaKey && event.code === 'KeyS') {
      event.preventDefault();
      skip();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
    if (/^[1-9]$/.test(event.key)) {
      const box = checkboxes('category')[Number(event.key) - 1];
      if (box && !box.disabled && !$('categories').disabled) {
        event.preventDefault();
        box.checked = !box.checked;
      }
    } else if (event.key === 's' || event.key === 'S') {
      event.preventDefault();
      skip();
    } else if (event.key === 'n' || event.key === 'N') {
      event.preventDefault();
      next(false);
    } else if (event.key === 'k' || event.key === 'K') {
      if (!$('keywords').disabled) {
        event.preventDefault();
        keywordInput.focus();
      }
    }
  });

  setInterval(tick, 1000);
  next(false);
})();
