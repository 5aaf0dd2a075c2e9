// The Jobs pages' live parts. A [data-live] region is asked for again every few seconds
// (the same page with the X-Jobs-Fragment header: the server answers with that region
// only) and replaced when it changed; a job's log follows its server-sent events. The
// session cookie goes with both (same origin); no key is ever kept in the browser.
"use strict";

const POLL_MS = 3000;
const RECONNECT_MS = 3000;

// Times in the viewer's time zone, as dashboard.js does at load, for content added later.
function localTimes(root) {
  for (const element of root.querySelectorAll("time[datetime]")) {
    const moment = new Date(element.getAttribute("datetime"));
    if (!Number.isNaN(moment.getTime())) {
      element.textContent = moment.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
      element.title = element.getAttribute("datetime");
    }
  }
}

function liveRegion(region) {
  const notice = document.querySelector("[data-offline]");
  const offlineText = notice ? notice.textContent : "";
  let stopped = false;
  let timer = null;

  function show(text) {
    if (!notice) return;
    notice.textContent = text;
    notice.hidden = false;
  }

  let busy = false;

  async function refresh() {
    clearTimeout(timer);
    if (stopped || busy) return; // the refresh under way schedules the next
    busy = true;
    if (!document.hidden) {
      try {
        const answer = await fetch(region.dataset.live, {
          headers: { "X-Jobs-Fragment": "1" },
          cache: "no-store",
          credentials: "same-origin",
          redirect: "manual",
        });
        if (answer.type === "opaqueredirect") { // to /login: the session is over
          stopped = true;
          show("Your session has ended: reload the page to log in again.");
          return;
        }
        if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
        const fresh = document.createElement("template");
        fresh.innerHTML = await answer.text(); // the server's own escaped HTML
        if (notice) { notice.hidden = true; notice.textContent = offlineText; }
        const now = fresh.content.querySelector("[data-version]");
        const shown = region.querySelector("[data-version]");
        // Only when what it shows changed, and not while someone works inside it: a
        // half-typed answer or a focused link stays.
        if (now && (!shown || now.dataset.version !== shown.dataset.version)
            && !region.contains(document.activeElement)) {
          region.replaceChildren(fresh.content);
          localTimes(region);
        }
      } catch (error) {
        show(offlineText);
      }
    }
    busy = false;
    timer = setTimeout(refresh, POLL_MS);
  }

  timer = setTimeout(refresh, 0);
  return { refresh };
}

function followLog(list, onNews) {
  const state = document.querySelector("[data-log-state]");
  let after = Number(list.dataset.after || "0");
  let source = null;

  function say(text) { if (state) state.textContent = text; }

  function add(entry) {
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
    const item = document.createElement("li");
    item.className = entry.level;
    const time = document.createElement("time");
    time.setAttribute("datetime", entry.timestamp);
    time.textContent = entry.timestamp;
    const message = document.createElement("span");
    message.className = "message";
    message.textContent = " " + entry.message; // text, never HTML
    item.append(time, message);
    list.append(item);
    localTimes(item);
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  function connect() {
    source = new EventSource(`${list.dataset.logStream}?after=${after}`);
    source.addEventListener("open", () => say(""));
    source.addEventListener("log", (event) => {
      after = Number(event.lastEventId) || after;
      add(JSON.parse(event.data));
      onNews();
    });
    source.addEventListener("end", () => {
      source.close();
      say("The job has ended; its log is complete.");
      onNews();
    });
    source.addEventListener("error", () => {
      say("Live log disconnected, reconnecting…");
      if (source.readyState === EventSource.CLOSED) { // refused, not dropped: try again ourselves
        setTimeout(connect, RECONNECT_MS);
      } // else the browser reconnects, naming the last line it had (Last-Event-ID)
    });
  }

  localTimes(list);
  list.scrollTop = list.scrollHeight;
  connect();
}

const region = document.querySelector("[data-live]");
const live = region ? liveRegion(region) : null;
const log = document.querySelector("[data-log-stream]");
if (log) {
  let soon = null;
  followLog(log, () => { // a log line often comes with a new status: look again shortly
    clearTimeout(soon);
    soon = setTimeout(() => live && live.refresh(), 300);
  });
}
