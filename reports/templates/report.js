(function () {
  "use strict";
  var $ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };

  function openTarget(id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    el.open = true;
    el.classList.add("flash");
    window.setTimeout(function () { el.classList.remove("flash"); }, 1600);
    el.scrollIntoView({block: "start"});
  }
  $("a.open").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      var id = a.getAttribute("data-target");
      if (history.replaceState) { history.replaceState(null, "", "#" + id); }
      openTarget(id);
    });
  });
  if (location.hash.length > 1) { openTarget(location.hash.slice(1)); }

  function copyText(text, button) {
    function done() { button.textContent = "copied"; button.classList.add("copied");
      window.setTimeout(function () { button.textContent = "copy"; button.classList.remove("copied"); }, 1500); }
    function fallback() {
      var ta = document.createElement("textarea");
      ta.value = text; ta.setAttribute("readonly", ""); ta.style.position = "fixed"; ta.style.opacity = "0";
      document.body.appendChild(ta); ta.select();
      var copied = false;
      try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
      if (copied) { done(); } else { button.textContent = "select and copy"; }
      document.body.removeChild(ta);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else { fallback(); }
  }
  $("button.copy").forEach(function (b) {
    b.addEventListener("click", function () {
      var text = b.getAttribute("data-copy");
      if (text === null) {
        var box = b.closest(".fix");
        var pre = box ? box.querySelector("pre.paste") : null;
        text = pre ? pre.textContent : "";
      }
      copyText(text, b);
    });
  });

  var form = document.getElementById("filters");
  function applyFilters() {
    if (!form) { return; }
    var statuses = $("input[name=status]:checked", form).map(function (i) { return i.value; });
    var node = form.elements.node.value;
    var check = form.elements.check.value.trim().toLowerCase();
    var shownRows = 0, totalRows = 0;
    $("table.matrix thead th[data-node]").forEach(function (th) {
      th.classList.toggle("hidden", node !== "" && th.getAttribute("data-node") !== node);
    });
    $("table.matrix tbody tr[data-check]").forEach(function (tr) {
      totalRows += 1;
      var any = false;
      $("td.cell", tr).forEach(function (td) {
        var nodeOk = node === "" || td.getAttribute("data-node") === node;
        td.classList.toggle("hidden", !nodeOk);
        if (nodeOk && statuses.indexOf(td.getAttribute("data-status")) >= 0) { any = true; }
      });
      var show = any && (check === "" || tr.getAttribute("data-check").toLowerCase().indexOf(check) >= 0);
      tr.classList.toggle("hidden", !show);
      if (show) { shownRows += 1; }
    });
    $("details.result").forEach(function (d) {
      var show = statuses.indexOf(d.getAttribute("data-status")) >= 0 &&
        (node === "" || d.getAttribute("data-node") === node) &&
        (check === "" || d.getAttribute("data-check").toLowerCase().indexOf(check) >= 0);
      d.classList.toggle("hidden", !show);
    });
    var shown = document.getElementById("shown");
    if (shown) { shown.textContent = shownRows + " of " + totalRows + " checks shown"; }
  }
  if (form) {
    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    form.addEventListener("change", applyFilters);
    form.addEventListener("input", applyFilters);
    applyFilters();
  }

  function setAll(open) { $("details.result").forEach(function (d) { d.open = open; }); }
  var ex = document.getElementById("expand-all"), co = document.getElementById("collapse-all");
  if (ex) { ex.addEventListener("click", function () { setAll(true); }); }
  if (co) { co.addEventListener("click", function () { setAll(false); }); }

  // Paper shows everything: open every details element for printing, restore afterwards.
  var wasOpen = [];
  window.addEventListener("beforeprint", function () {
    wasOpen = $("details").map(function (d) { return d.open; });
    $("details").forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    $("details").forEach(function (d, i) { d.open = !!wasOpen[i]; });
  });
}());
