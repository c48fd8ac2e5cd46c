/// The admin page's style sheet and script, served by the server itself (`/_admin/assets/…`):
/// the page loads nothing from anywhere else.
enum AdminAssets {
    /// The tab's icon: a small revision tree, a winner and a conflict.
    static let icon = """
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path d="M16 6 L8 24 M16 6 L24 24" stroke="#59627a" stroke-width="3" fill="none"/><circle cx="16" cy="6" r="5" fill="#9db0cf"/><circle cx="8" cy="24" r="6" fill="#2a9d4a"/><circle cx="24" cy="24" r="6" fill="#e07000"/></svg>
    """

    static let css = """
    :root { --ink: #1d2330; --muted: #667085; --line: #d8dde6; --accent: #1c5fd4; --winner: #2a9d4a; --conflict: #e07000; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f7f8fa; }
    header { background: #1d2330; color: #fff; padding: 10px 20px; font-size: 15px; }
    header a { color: #fff; text-decoration: none; }
    header .home { font-weight: 600; }
    header .sep { color: #8b93a7; margin: 0 4px; }
    header .here { color: #c9d1e3; }
    main { padding: 16px 20px 40px; max-width: 1200px; }
    h1 { font-size: 22px; margin: 6px 0 12px; word-break: break-all; }
    h2 { font-size: 17px; margin: 22px 0 8px; }
    h3 { font-size: 15px; margin: 14px 0 6px; }
    a { color: var(--accent); }
    table { border-collapse: collapse; background: #fff; border: 1px solid var(--line); width: 100%; }
    th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
    th { background: #eef1f6; font-weight: 600; font-size: 13px; }
    td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
    td.id, td.rev, code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; word-break: break-all; }
    tr.deleted td { color: var(--muted); }
    tr.live { animation: arrive 2s ease-out; }
    @keyframes arrive { from { background: #fff4c2; } to { background: transparent; } }
    .channel { display: inline-block; background: #e8eefb; border-radius: 10px; padding: 0 8px; margin: 1px 0; text-decoration: none; font-size: 12.5px; }
    .tabs { margin: 0 0 14px; display: flex; gap: 14px; }
    .tabs a { text-decoration: none; padding-bottom: 3px; }
    .tabs a.current { border-bottom: 2px solid var(--accent); font-weight: 600; }
    form#filter { margin: 0 0 10px; display: flex; gap: 14px; align-items: center; flex-wrap: wrap; }
    input[type=search], input[type=text] { padding: 4px 6px; border: 1px solid var(--line); border-radius: 4px; }
    textarea { width: 100%; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; border: 1px solid var(--line); border-radius: 4px; padding: 8px; }
    label.block { display: block; margin: 8px 0; }
    button { padding: 4px 12px; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 4px; cursor: pointer; }
    .status { color: var(--muted); font-size: 12.5px; margin: 0 0 6px; }
    .status.on { color: var(--winner); }
    .empty { color: var(--muted); }
    .error { color: #b42318; font-weight: 600; white-space: pre-wrap; }
    .paging { margin: 10px 0; }
    pre.json, pre.code { background: #fff; border: 1px solid var(--line); padding: 10px 12px; overflow: auto; max-height: 480px; font-size: 12.5px; white-space: pre-wrap; word-break: break-all; }
    dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 8px; }
    dl.facts dt { color: var(--muted); }
    dl.facts dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; word-break: break-all; }
    .tree-scroll { overflow: auto; max-height: 560px; background: #fff; border: 1px solid var(--line); }
    #revtree text { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; fill: var(--ink); }
    #revtree a { cursor: pointer; }
    #revtree a:focus .mark, #revtree a:hover .mark { stroke: var(--accent); stroke-width: 3; }
    .edge { fill: none; stroke: #9aa3b5; stroke-width: 2; }
    .rev .mark { fill: #fff; stroke: #59627a; stroke-width: 2; stroke-dasharray: 3 2; }
    .rev.kept .mark { fill: #9db0cf; stroke-dasharray: none; }
    .rev.winner .mark { fill: var(--winner); stroke: #1b6b31; }
    .rev .ring { fill: none; stroke: var(--winner); stroke-width: 3; }
    .rev.conflict .mark { fill: var(--conflict); stroke: #9a4d00; }
    .rev.deleted .mark { fill: #e3e6ec; stroke: #59627a; }
    .rev.deleted .cross { stroke: #2c3344; stroke-width: 2; }
    .rev.selected .mark { stroke: var(--accent); stroke-width: 4; stroke-dasharray: none; }
    ul#legend { list-style: none; display: flex; flex-wrap: wrap; gap: 6px 18px; padding: 0; margin: 8px 0; }
    ul#legend li { display: flex; align-items: center; gap: 4px; }
    ul.leaves { list-style: none; padding: 0; }
    ul.leaves li { margin: 6px 0; }
    .badge { background: var(--winner); color: #fff; border-radius: 8px; padding: 0 7px; font-size: 12px; }
    """

    static let javaScript = """
    "use strict";
    // The document list stays live: each change on the database's feed brings that document's
    // row, rendered (and escaped) by the server, to the top of the list.
    (function () {
      const table = document.getElementById("documents");
      const status = document.getElementById("live-status");
      if (!table || !table.dataset.events || !window.EventSource) return;
      const rowsURL = table.dataset.rows;
      const prefix = table.dataset.prefix || "";
      const body = table.tBodies[0];
      const setStatus = (text, on) => {
        if (!status) return;
        status.textContent = text;
        status.classList.toggle("on", on);
      };
      const source = new EventSource(table.dataset.events);
      source.onopen = () => setStatus("live updates: on", true);
      source.onerror = () => setStatus("live updates: reconnecting…", false);
      let queue = Promise.resolve();
      source.onmessage = (event) => {
        let change;
        try { change = JSON.parse(event.data); } catch (e) { return; }
        if (!change || typeof change.id !== "string" || !change.id.startsWith(prefix)) return;
        // One row at a time, in the feed's order.
        queue = queue.then(() => showRow(change.id)).catch(() => {});
      };
      async function showRow(id) {
        const response = await fetch(rowsURL + encodeURIComponent(id), { headers: { Accept: "text/html" } });
        for (const old of Array.from(body.rows)) {
          if (old.dataset.id === id) old.remove();
        }
        if (!response.ok) return;   // purged: no row any more
        const template = document.createElement("template");
        template.innerHTML = (await response.text()).trim();
        const row = template.content.querySelector("tr");
        if (!row) return;
        row.classList.add("live");
        body.insertBefore(row, body.firstChild);
        const empty = document.querySelector("p.empty");
        if (empty) empty.remove();
      }
    })();
    """
}
