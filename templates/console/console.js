// chatgate console: live updates from the gateway's own event stream (/v1/events, which the
// session cookie opens for reading). No framework; the server renders every row and page.
(function () {
  "use strict";
  var errorBanner = document.getElementById("page-error");
  window.addEventListener("error", function () { if (errorBanner) errorBanner.hidden = false; });
  window.addEventListener("unhandledrejection", function () { if (errorBanner) errorBanner.hidden = false; });

  var mode = document.body.dataset.live;
  if (!mode || !window.EventSource) return;
  var status = document.getElementById("live-status");
  var say = function (text) { if (status) status.textContent = text; };

  function html(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (r) {
      if (r.status === 204) return null;
      if (!r.ok) throw new Error("console fetch " + url + ": " + r.status);
      return r.text();
    });
  }

  // Commands: a moved row is rendered again; a new one that matches the filters comes on top.
  function updateRow(id) {
    var table = document.getElementById("commands");
    if (!table) return;
    var query = table.dataset.filter || "";
    html("/console/commands/" + encodeURIComponent(id) + "/row?" + query).then(function (text) {
      if (text === null) return;
      var holder = document.createElement("tbody");
      holder.innerHTML = text.trim();
      var row = holder.firstElementChild;
      var old = table.querySelector('tr[data-command="' + id + '"]');
      if (old) { old.replaceWith(row); }
      else if (location.search.indexOf("cursor=") < 0) { table.tBodies[0].prepend(row); }
      else { return; } // an older page: new commands belong on the first
      row.classList.add("fresh");
      var empty = document.getElementById("empty");
      if (empty) empty.remove();
    }).catch(function (e) { say("live update failed: " + e.message); });
  }

  // Other pages: each live region is rendered again, unless nothing in it changed or the
  // operator is using a field in it (what they type is never thrown away).
  function busy(region) {
    if (region.contains(document.activeElement) && document.activeElement !== document.body) return true;
    return Array.prototype.some.call(region.querySelectorAll("input:not([type=hidden]), textarea"),
      function (field) { return field.value !== ""; });
  }
  var pending = false;
  function refreshRegion(delay) {
    if (pending) return;
    pending = true;
    setTimeout(function () {
      html(location.href).then(function (text) {
        pending = false;
        var doc = new DOMParser().parseFromString(text || "", "text/html");
        document.querySelectorAll("[data-live-region]").forEach(function (here) {
          var fresh = doc.getElementById(here.id);
          if (fresh && fresh.textContent !== here.textContent && !busy(here)) here.replaceWith(fresh);
        });
      }).catch(function (e) { pending = false; say("live update failed: " + e.message); });
    }, delay);
  }

  // Under load many commands move each second: rows are fetched at most twice a second, and
  // when many moved at once the table is rendered again instead (one request, not dozens).
  var queued = [];
  function queueRow(id) {
    if (queued.indexOf(id) < 0) queued.push(id);
    if (queued.length > 1) return;
    setTimeout(function () {
      var ids = queued;
      queued = [];
      if (ids.length > 8) { refreshRegion(0); } else { ids.forEach(updateRow); }
    }, 500);
  }

  var watched = (document.body.dataset.watch || "").split(" ").filter(Boolean);
  function connect() {
    var source = new EventSource("/v1/events");
    // The stream starts at the moment it opens: what moved between rendering the page and now (or
    // while reconnecting) is caught up by rendering the live region once more.
    source.addEventListener("open", function () { refreshRegion(0); say("live"); });
    source.addEventListener("error", function () {
      say("reconnecting…");
      // A refusal (too many streams open, 429) or the end of the session closes the stream for
      // good: the browser does not try again by itself, so the page does, a little later.
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
    });
    source.addEventListener("transition", function (event) {
      var data = JSON.parse(event.data);
      if (mode === "rows") { queueRow(data.command_id); }
      else if (mode === "watch") { if (watched.indexOf(data.command_id) >= 0) refreshRegion(300); }
      else { refreshRegion(1500); }
    });
  }
  connect();
})();
