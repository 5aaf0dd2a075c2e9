// A proactive agent's page: its output as the run writes it, and its state as it changes.
"use strict";

(() => {
  const output = document.getElementById("output");
  if (!output) return;
  const state = document.getElementById("state");
  const empty = document.getElementById("no-output");
  let wasRunning = output.dataset.running === "true";

  function show(text, append) {
    output.textContent = append ? output.textContent + text : text;
    output.hidden = !output.textContent;
    empty.hidden = !output.hidden;
  }

  window.claybotLive.follow(output.dataset.live, (event) => {
    const payload = event.payload;
    if (event.type === "snapshot") show(payload.text, false);
    else if (event.type === "output") show(payload.text, true);
    else if (event.type === "agent:deleted") location.assign("/proactive");
    else if (event.type === "agent:update") {
      state.textContent = payload.status + (payload.running ? ", running" : "");
      // A run that ended has a row in Runs now: show it.
      if (wasRunning && !payload.running) location.reload();
      wasRunning = payload.running;
    }
  });
})();
