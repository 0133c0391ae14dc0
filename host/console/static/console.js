// toolgen console: an enhancement only. Every decision works without it (plain forms).
// It shows times in the viewer's zone and keeps the page's live region up to date from
// the console's event stream (the store-backed /events of this tenant), without a reload.
(function () {
  'use strict';

  function localTimes(root) {
    root.querySelectorAll('time[datetime]').forEach(function (t) {
      if (t.dataset.local) return;
      var d = new Date(t.getAttribute('datetime'));
      if (isNaN(d.getTime())) return;
      t.title = t.textContent;
      t.textContent = d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
      t.dataset.local = '1';
    });
  }

  // editing reports whether a person is in the middle of a form in el.
  function editing(el) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) return true;
    var typed = false;
    el.querySelectorAll('textarea, input[type=text]').forEach(function (f) { if (f.value) typed = true; });
    return typed;
  }

  // merge puts next's children in place of live's, by data-key: a child a person is
  // editing stays as it is; every other one is replaced; gone ones are removed.
  function merge(live, next) {
    var old = {};
    Array.prototype.forEach.call(live.children, function (c) { if (c.dataset.key) old[c.dataset.key] = c; });
    var kept = [];
    Array.prototype.forEach.call(next.children, function (c) {
      var k = c.dataset.key, o = k && old[k];
      if (o && editing(o)) { kept.push(o); delete old[k]; return; }
      kept.push(document.importNode(c, true));
    });
    live.replaceChildren.apply(live, kept);
    localTimes(live);
  }

  function start() {
    localTimes(document);
    var live = document.getElementById('live');
    var last = document.body.dataset.lastEventId;
    var status = document.getElementById('live-status');
    if (!live || last === undefined || !window.EventSource || !window.fetch) return;

    var busy = false, again = false, timer = null;
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(location.href, { headers: { 'X-Console-Partial': '1' }, credentials: 'same-origin', cache: 'no-store' })
        .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, 'text/html');
          var next = doc.getElementById('live');
          if (next) merge(live, next);
        })
        .catch(function () {})
        .then(function () { busy = false; if (again) { again = false; refresh(); } });
    }
    function soon() { clearTimeout(timer); timer = setTimeout(refresh, 150); }

    var es = new EventSource('/console/events?last_event_id=' + encodeURIComponent(last));
    ['recorded', 'held', 'started', 'effect_sent', 'released', 'suspended', 'settled', 'uncertain', 'resolved']
      .forEach(function (k) { es.addEventListener(k, soon); });
    es.onopen = function () { if (status) { status.hidden = false; status.className = 'live-status'; status.textContent = 'live'; } };
    es.onerror = function () { if (status) { status.hidden = false; status.className = 'live-status off'; status.textContent = 'reconnecting…'; } };
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
