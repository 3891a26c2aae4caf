// preflight report: filter the nodes by text, expand or collapse them, open a linked node.
// The page is complete without this script; it only adds the search box and the buttons.
(function () {
  "use strict";
  var tools = document.getElementById("node-tools");
  var list = document.getElementById("node-list");
  if (!tools || !list) return;
  var input = document.getElementById("node-search");
  var count = document.getElementById("node-count");
  var nodes = Array.prototype.slice.call(list.querySelectorAll("details.node"));
  var texts = new Map();
  var timer = 0;

  function textOf(node) {
    var text = texts.get(node);
    if (text === undefined) {
      text = node.textContent.toLowerCase();
      texts.set(node, text);
    }
    return text;
  }

  function apply() {
    var query = input.value.trim().toLowerCase();
    var shown = 0;
    nodes.forEach(function (node) {
      var hit = !query || textOf(node).indexOf(query) !== -1;
      node.hidden = !hit;
      if (hit) shown += 1;
    });
    count.textContent = query
      ? shown + " of " + nodes.length + " nodes match"
      : nodes.length + (nodes.length === 1 ? " node" : " nodes");
  }

  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") {
      target.hidden = false;
      target.open = true;
    }
  }

  tools.hidden = false;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(apply, nodes.length > 200 ? 120 : 30);
  });
  tools.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-act]");
    if (!button) return;
    var open = button.getAttribute("data-act") === "expand";
    nodes.forEach(function (node) {
      if (!node.hidden) node.open = open;
    });
  });
  window.addEventListener("hashchange", openTarget);
  openTarget();
  apply();
})();
