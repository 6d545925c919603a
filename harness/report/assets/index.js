/* The run browser: filter rows by text and verdict, sort by a column. */
(function () {
  "use strict";
  const table = document.getElementById("runs");
  const search = document.getElementById("search");
  const buttons = Array.from(document.querySelectorAll("button.filter"));
  let verdict = "";
  function apply() {
    if (!table) return;
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const row of table.tBodies[0].rows) {
      const text = row.textContent.toLowerCase();
      const shown = (!verdict || row.dataset.verdict === verdict) &&
        words.every((word) => text.indexOf(word) >= 0);
      row.hidden = !shown;
    }
  }
  search.addEventListener("input", apply);
  for (const button of buttons) {
    button.addEventListener("click", () => {
      verdict = button.dataset.verdict;
      buttons.forEach((b) => b.classList.toggle("active", b === button));
      apply();
    });
  }
  if (table) {
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, col) => {
      th.addEventListener("click", () => {
        const ascending = !th.classList.contains("sorted-asc");
        heads.forEach((h) => h.classList.remove("sorted-asc", "sorted-desc"));
        th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
        const key = (row) => {
          const cell = row.cells[col];
          return cell.dataset.sort != null ? cell.dataset.sort : cell.textContent.trim();
        };
        const rows = Array.from(table.tBodies[0].rows);
        rows.sort((a, b) => {
          const x = key(a);
          const y = key(b);
          const numeric = x !== "" && y !== "" && !isNaN(x) && !isNaN(y);
          const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return ascending ? order : -order;
        });
        rows.forEach((row) => table.tBodies[0].appendChild(row));
      });
    });
  }
  document.body.dataset.ready = "1";
})();
