// The Cairn web UI: lists runs, submits bash and python runs, and shows a run's log.
const $ = (id) => document.getElementById(id);
const token = () => localStorage.getItem('cairn-token') || '';

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json', ...(options.headers || {}) },
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.error || `${response.status} ${response.statusText}`);
  }
  return response;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

async function showLog(id) {
  const text = await (await api(`/v1/runs/${encodeURIComponent(id)}/logs`)).text();
  $('log-title').hidden = false;
  $('log-title').textContent = `Log of ${id}`;
  $('log').hidden = false;
  $('log').textContent = text;
}

async function refresh() {
  if (!token()) {
    $('message').textContent = 'Paste an API token to begin (the first start printed one).';
    return;
  }
  try {
    const { runs } = await (await api('/v1/runs?limit=50')).json();
    const rows = runs.map((run) => {
      const tr = document.createElement('tr');
      const link = document.createElement('a');
      link.href = '#';
      link.textContent = run.id;
      link.onclick = (event) => { event.preventDefault(); showLog(run.id).catch((e) => ($('message').textContent = e.message)); };
      const idCell = document.createElement('td');
      idCell.append(link);
      tr.append(idCell, cell(run.tool), cell(run.status, `status-${run.status}`), cell(run.requested_by), cell(run.created_at));
      return tr;
    });
    $('runs').replaceChildren(...rows);
    $('message').textContent = '';
  } catch (err) {
    $('message').textContent = err.message;
  }
}

$('token-form').onsubmit = (event) => {
  event.preventDefault();
  localStorage.setItem('cairn-token', $('token').value.trim());
  $('token').value = '';
  refresh();
};

$('run-form').onsubmit = async (event) => {
  event.preventDefault();
  try {
    const run = await (await api('/v1/runs', { method: 'POST', body: JSON.stringify({ tool: $('tool').value, command: $('command').value }) })).json();
    $('message').textContent = `Submitted ${run.id}`;
    refresh();
  } catch (err) {
    $('message').textContent = err.message;
  }
};

refresh();
setInterval(refresh, 3000);
