// The dashboard's live parts: an event stream that says when it drops and catches up
// when it comes back, and forms that post without leaving the page.
"use strict";

window.claybotLive = (() => {
  const status = () => document.getElementById("live-status");

  function say(text) {
    const element = status();
    if (element) {
      element.textContent = text;
      element.hidden = !text;
    }
  }

  function resumeUrl(url, lastId) {
    const target = new URL(url, location.href);
    target.searchParams.set("after", lastId);
    return target.pathname + target.search;
  }

  // Why a stream failed: the session ended (the page redirects to the login), no engine
  // answers, or the engine is there and only the stream broke.
  async function diagnose() {
    try {
      const answer = await fetch(location.pathname, { redirect: "manual", cache: "no-store" });
      return answer.type === "opaqueredirect" ? "ended" : "reachable";
    } catch {
      return "unreachable";
    }
  }

  // Follow an SSE stream of engine events. The browser reconnects by itself, sending
  // Last-Event-ID; when it gives up (the stream was refused), a new stream starts after
  // the last event seen, so nothing still in the engine's buffer is missed.
  function follow(url, onEvent) {
    let lastId = null;
    let delay = 1000;
    const open = () => {
      const source = new EventSource(lastId === null ? url : resumeUrl(url, lastId));
      source.onopen = () => {
        say("");
        delay = 1000;
      };
      source.onmessage = (message) => {
        if (message.lastEventId) lastId = message.lastEventId;
        let event;
        try {
          event = JSON.parse(message.data);
        } catch {
          return;
        }
        onEvent(event);
      };
      source.onerror = async () => {
        const gaveUp = source.readyState === EventSource.CLOSED;
        const state = await diagnose();
        if (state === "ended") {
          source.close();
          say("Your session has ended: reload the page to log in again.");
          return;
        }
        if (state === "unreachable") say("The engine is unreachable; reconnecting…");
        else say("The live stream dropped; reconnecting…");
        if (gaveUp) {
          setTimeout(open, delay);
          delay = Math.min(delay * 2, 30000);
        }
      };
    };
    open();
  }

  // A form's fields as a browser would post them, less what a file field left empty
  // adds: a part with no file name and no bytes, which is no file.
  function fieldsOf(form, submitter) {
    const fields = new FormData();
    for (const [name, value] of new FormData(form, submitter)) {
      if (value instanceof File && value.name === "" && value.size === 0) continue;
      fields.append(name, value);
    }
    return fields;
  }

  // Post a form as the page's script: the server answers 204 and the page updates in
  // place (the answer is returned, for its headers). Anything else (a refusal, a
  // problem) is shown as the server's own page, and null is returned.
  async function post(form, submitter) {
    let answer;
    try {
      answer = await fetch(form.action, {
        method: "POST",
        body: fieldsOf(form, submitter),
        headers: { "X-Claybot-Fetch": "1" },
        credentials: "same-origin",
      });
    } catch {
      say("The engine is unreachable: nothing was sent.");
      return null;
    }
    if (answer.status === 204) return answer;
    if (answer.redirected && new URL(answer.url).pathname === "/login") {
      location.assign("/login");
      return null;
    }
    const page = new DOMParser().parseFromString(await answer.text(), "text/html");
    const problem = page.querySelector(".alert");
    say(problem ? problem.textContent : `The engine answered ${answer.status}.`);
    return null;
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !("fetch" in form.dataset)) return;
    event.preventDefault();
    const submitter = event.submitter;
    if (await post(form, submitter)) {
      form.dispatchEvent(new CustomEvent("posted", { bubbles: true, detail: { submitter } }));
    }
  });

  return { follow, post, say };
})();
