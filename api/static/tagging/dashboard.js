/* The project dashboard: GET stats every 5 s (project figures, teams, people, top-5 lists, people online). */
'use strict';

(() => {
  const {api, el, status, errorText, formatTime, formatSeconds} = Tagging;
  const REFRESH_MS = 5000;

  function num(value) {
    return value === null || value === undefined ? '–' : String(value);
  }

  function cell(value, numeric, name) {
    return el('td', {className: numeric ? 'num' : '', dataset: name ? {col: name} : {}}, value);
  }

  function fillTable(id, rows, key, columns) {
    const body = document.querySelector(`#${id} tbody`);
    if (!rows.length) {
      body.replaceChildren(el('tr', {className: 'none'},
        el('td', {colspan: String(columns.length + 1), className: 'muted'}, 'nobody yet')));
      return;
    }
    body.replaceChildren(...rows.map((row) => el('tr', {dataset: {[key]: row[key]}},
      cell(row[key], false, key),
      ...columns.map(([name, format, numeric]) => cell(format(row[name]), numeric, name)))));
  }

  function fillTop(kind, entries) {
    const list = document.getElementById('top-' + kind);
    if (!entries.length) {
      list.replaceChildren(el('li', {className: 'muted none'}, 'none yet'));
      return;
    }
    const most = Math.max(...entries.map((e) => e.count), 1);
    list.replaceChildren(...entries.map((e) => {
      const bar = el('span', {className: 'bar'});
      bar.style.width = Math.round((100 * e.count) / most) + '%';  // CSSOM, allowed by the CSP (no inline style)
      return el('li', {dataset: {name: e.name, count: e.count}},
        el('span', {className: 'name'}, e.name), el('span', {className: 'count'}, String(e.count)),
        el('span', {className: 'bar-track'}, bar));
    }));
  }

  function render(stats) {
    const project = stats.project || {};
    for (const node of document.querySelectorAll('#project-figures .figure')) {
      node.querySelector('.v').textContent = num(project[node.dataset.figure]);
    }
    const total = project.total || 0;
    const progress = document.getElementById('progress');
    progress.value = total ? (total - (project.remaining || 0)) / total : 0;
    progress.title = total ? `${total - project.remaining} of ${total} items finished` : 'no items';
    fillTable('teams-table', stats.teams || [], 'team', [
      ['quota', (v) => (v === null || v === undefined ? 'no limit' : String(v)), true],
      ['used', num, true], ['assigned', num, true], ['finished', num, true], ['correct', num, true],
      ['incorrect', num, true], ['average_seconds', formatSeconds, true]]);
    fillTable('users-table', stats.users || [], 'user', [
      ['team', (v) => v || '–', false], ['assigned', num, true], ['finished', num, true], ['correct', num, true],
      ['incorrect', num, true], ['average_seconds', formatSeconds, true]]);
    const top = stats.top || {};
    for (const kind of ['categories', 'subcategories', 'keywords']) fillTop(kind, top[kind] || []);
    document.getElementById('online').textContent = num(stats.online);
    const asOf = document.getElementById('as-of');
    asOf.textContent = stats.as_of ? 'figures as of ' + formatTime(stats.as_of) : 'no figures yet';
    asOf.title = stats.as_of || '';
    document.body.dataset.loaded = String(Date.now());
  }

  async function load() {
    const answer = await api('GET', '/stats');
    if (answer.ok) {
      render(answer.data);
      status('', '');
    } else {
      status('error', errorText(answer));
    }
  }

  load();
  setInterval(load, REFRESH_MS);
})();
