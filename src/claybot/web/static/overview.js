// The Overview's activity feed: the engine's events as they happen, newest first.
"use strict";

(() => {
  const feed = document.getElementById("feed");
  if (!feed) return;
  const KEPT = 50;

  // A few words on what an event is about: its agent, task, job or request.
  function about(payload) {
    const parts = [];
    for (const key of ["agentId", "taskId", "jobId", "requestId", "permission", "status", "name", "error"]) {
      if (typeof payload[key] === "string" && payload[key]) parts.push(`${key} ${payload[key]}`);
    }
    return parts.join(" · ");
  }

  window.claybotLive.follow(feed.dataset.events, (event) => {
    if (event.type === "init" || event.type === "agent.delta") return; // deltas: too many words
    const item = document.createElement("li");
    const when = document.createElement("time");
    when.dateTime = event.timestamp;
    when.textContent = new Date(event.timestamp).toLocaleTimeString();
    const kind = document.createElement("strong");
    kind.textContent = event.type;
    const detail = document.createElement("span");
    detail.className = "muted";
    detail.textContent = about(event.payload || {});
    item.append(when, " ", kind, " ", detail);
    feed.prepend(item);
    while (feed.children.length > KEPT) feed.lastElementChild.remove();
    document.getElementById("feed-empty").hidden = true;
  });
})();
