/* The QA page: tagged items waiting for verification with their tags and source, Correct / Incorrect with a
 * note. A verified item leaves the list. The list is merged on refresh, so a note being typed is kept. */
'use strict';

(() => {
  const {api, el, status, errorText, formatTime, typing} = Tagging;
  const list = document.getElementById('review-list');
  const REFRESH_MS = 15000;
  const done = new Set();  // verified here: a list fetched before the verification must not bring it back
  let loading = false;

  function chips(values, className) {
    return el('ul', {className: 'chips'}, ...values.map((v) => el('li', {className: 'chip ' + className}, v)));
  }

  function tagRow(label, values, className) {
    return el('div', {className: 'tag-row'}, el('span', {className: 'tag-label'}, label),
      values.length ? chips(values, className) : el('span', {className: 'muted'}, 'none'));
  }

  function sourceBlock(source) {
    if (!source || source.missing) {
      return el('div', {className: 'missing'}, el('strong', {}, 'Source missing:'),
        ' the archived message or post was deleted since the project was made.');
    }
    const meta = [source.author || 'unknown', formatTime(source.time)];
    if (source.channel) meta.push('#' + source.channel);
    const block = el('div', {className: 'source'}, el('div', {className: 'source-meta'}, meta.join(' · ')));
    const thread = source.thread || [];
    if (thread.length) {
      block.append(el('ol', {className: 'thread compact'}, ...thread.map((m) => el('li', {},
        el('span', {className: 'thread-meta'}, (m.author || 'unknown') + ': '), el('span', {}, m.text || '')))));
    }
    block.append(el('div', {className: 'item-text'}, source.text || ''));
    return block;
  }

  function card(item) {
    const note = el('input', {type: 'text', className: 'note', placeholder: 'Note for the tagger (optional)',
                              maxlength: '1000', 'aria-label': 'Note on item ' + item.seq});
    const correct = el('button', {type: 'button', className: 'correct'}, 'Correct');
    const incorrect = el('button', {type: 'button', className: 'incorrect'}, 'Incorrect');
    const node = el('li', {className: 'review-item card', dataset: {seq: item.seq}},
      el('div', {className: 'card-head'},
        el('h2', {}, '#' + item.seq),
        el('span', {className: 'muted'}, 'tagged by ', el('strong', {className: 'tagger'}, item.holder || '?'),
          item.team ? ' (team ' + item.team + ')' : '', item.tagged_at ? ' · ' + formatTime(item.tagged_at) : '')),
      sourceBlock(item.source),
      el('div', {className: 'tags'},
        tagRow('Categories', item.categories || [], 'cat'),
        tagRow('Subcategories', item.subcategories || [], 'sub'),
        tagRow('Keywords', item.keywords || [], 'kw')),
      el('div', {className: 'verify'}, note, correct, incorrect));
    correct.addEventListener('click', () => verify(node, 'Correct'));
    incorrect.addEventListener('click', () => verify(node, 'Incorrect'));
    return node;
  }

  function updateCount() {
    const count = list.children.length;
    document.getElementById('review-count').textContent = count ? '(' + count + ')' : '';
    document.getElementById('review-empty').hidden = count !== 0;
  }

  async function verify(node, result) {
    const seq = node.dataset.seq;
    const buttons = node.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    const note = node.querySelector('input.note').value.trim();
    const answer = await api('POST', `/items/${seq}/verify`, {result, note});
    if (answer.ok) {
      done.add(seq);
      node.remove();
      status('ok', `Item #${seq} marked ${result}.`);
    } else if (answer.status === 409) {
      done.add(seq);
      node.remove();  // someone verified it first (or it left the workflow): nothing to do here any more
      status('error', `Item #${seq}: ${errorText(answer)}`);
    } else {
      buttons.forEach((b) => { b.disabled = false; });
      status('error', `Item #${seq}: ${errorText(answer)}`);
    }
    updateCount();
  }

  async function load() {
    if (loading) return;
    loading = true;
    try {
      const answer = await api('GET', '/review?limit=50');
      if (!answer.ok) {
        status('error', errorText(answer));
        return;
      }
      const items = answer.data.items || [];
      const wanted = new Set(items.map((i) => String(i.seq)));
      for (const node of Array.from(list.children)) {
        if (!wanted.has(node.dataset.seq)) node.remove();
      }
      const shown = new Set(Array.from(list.children, (n) => n.dataset.seq));
      for (const item of items) {
        if (!shown.has(String(item.seq)) && !done.has(String(item.seq))) list.append(card(item));
      }
      updateCount();
    } finally {
      loading = false;
    }
  }

  document.getElementById('review-refresh').addEventListener('click', load);
  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
    const first = list.firstElementChild;
    if (event.key === 'r' || event.key === 'R') {
      event.preventDefault();
      load();
    } else if (first && (event.key === 'c' || event.key === 'C')) {
      event.preventDefault();
      verify(first, 'Correct');
    } else if (first && (event.key === 'x' || event.key === 'X')) {
      event.preventDefault();
      verify(first, 'Incorrect');
    }
  });

  load();
  setInterval(load, REFRESH_MS);
})();
