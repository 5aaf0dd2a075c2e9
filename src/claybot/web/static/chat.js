// The Chat page: replies stream in, tool calls become cards, permission prompts appear
// with Allow and Deny, and a message is sent without leaving the page.
"use strict";

(() => {
  const chat = document.getElementById("chat");
  if (!chat) return;
  const live = window.claybotLive;
  const history = document.getElementById("history");
  const prompts = document.getElementById("prompts");
  const template = document.getElementById("prompt-template");
  const composer = document.getElementById("composer");
  const replies = new Map(); // outgoing message id -> its card
  const calls = new Map(); // tool call id -> its card

  function card(kind, label) {
    const item = document.createElement("li");
    item.className = `card ${kind}`;
    const header = document.createElement("header");
    const name = document.createElement("span");
    name.className = "kind";
    name.textContent = label;
    header.append(name);
    item.append(header);
    history.append(item);
    item.scrollIntoView({ block: "nearest" });
    return item;
  }

  function textOf(item) {
    let text = item.querySelector("p.text");
    if (!text) {
      text = document.createElement("p");
      text.className = "text";
      item.append(text);
    }
    return text;
  }

  // A message's files, as the history cards show them: images inline, the rest as
  // downloads with their size (the same types the server serves inline).
  const INLINE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

  function size(bytes) {
    let value = bytes;
    for (const unit of ["B", "kB", "MB"]) {
      if (value < 1000) return unit === "B" ? `${value} B` : `${value.toFixed(1)} ${unit}`;
      value /= 1000;
    }
    return `${value.toFixed(1)} GB`;
  }

  function showFiles(item, files) {
    if (!files || !files.length || item.querySelector("ul.files")) return;
    const list = document.createElement("ul");
    list.className = "files";
    for (const file of files) {
      const entry = document.createElement("li");
      const link = document.createElement("a");
      link.href = `/files/${encodeURIComponent(file.id)}?name=${encodeURIComponent(file.name)}`;
      if (INLINE.has(file.mimeType)) {
        const image = document.createElement("img");
        image.src = link.href;
        image.alt = file.name;
        link.append(image);
        entry.append(link);
      } else {
        link.download = file.name;
        link.textContent = file.name;
        const note = document.createElement("span");
        note.className = "muted";
        note.textContent = ` (${size(file.size)})`;
        entry.append(link, note);
      }
      list.append(entry);
    }
    item.append(list);
  }

  function reply(outgoingId) {
    let item = replies.get(outgoingId);
    if (!item) {
      item = card("assistant_message live", "Reply");
      item.dataset.outgoing = outgoingId;
      replies.set(outgoingId, item);
    }
    return item;
  }

  function addPrompt(request) {
    if (document.getElementById(`p${request.requestId}`)) return;
    const item = template.content.firstElementChild.cloneNode(true);
    item.id = `p${request.requestId}`;
    item.dataset.request = request.requestId;
    item.querySelector(".who").textContent = request.agentLabel;
    item.querySelector(".what").textContent = request.permission;
    item.querySelector(".why").textContent = request.reason;
    item.querySelector("form").action = `/permissions/${encodeURIComponent(request.requestId)}`;
    prompts.append(item);
  }

  function decided(requestId, outcome) {
    const item = document.getElementById(`p${requestId}`);
    if (!item) return;
    item.querySelector("form").hidden = true;
    const said = item.querySelector(".decided");
    said.textContent = outcome;
    said.hidden = false;
  }

  const handlers = {
    init: (payload) => payload.pendingPermissions.forEach(addPrompt),
    "agent.delta": (payload) => {
      textOf(reply(payload.outgoingId)).textContent += payload.text;
    },
    "agent.outgoing": (payload) => {
      const item = reply(payload.message.id);
      textOf(item).textContent = payload.message.text;
      showFiles(item, payload.message.files);
      item.classList.remove("live");
    },
    "provider.fallback": () => {
      // What the failed provider streamed is void; the next one writes the reply anew.
      for (const item of history.querySelectorAll(".card.live")) textOf(item).textContent = "";
    },
    "agent.tool_call": (payload) => {
      const item = card("tool_call", "Tool call");
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = payload.name;
      const args = document.createElement("pre");
      args.textContent = payload.arguments;
      details.append(summary, args);
      item.append(details);
      calls.set(payload.callId, item);
    },
    "agent.tool_result": (payload) => {
      const item = calls.get(payload.callId);
      if (!item) return;
      const result = document.createElement("pre");
      result.className = "result";
      result.textContent = payload.text;
      item.querySelector("details").append(result);
      if (payload.isError) item.querySelector("summary").textContent += " (error)";
    },
    "permission.requested": addPrompt,
    "permission.granted": (payload) => decided(payload.requestId, "Allowed."),
    "permission.denied": (payload) => decided(payload.requestId, "Denied."),
  };

  live.follow(chat.dataset.events, (event) => {
    const handle = handlers[event.type];
    if (handle) handle(event.payload);
  });

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const field = composer.elements.text;
    const chosen = composer.elements.file;
    const text = field.value;
    if (!text.trim() && !chosen.files.length) {
      live.say("Write a message or attach a file.");
      return;
    }
    const answer = await live.post(composer, event.submitter);
    if (answer) {
      live.say("");
      const item = card("user_message", "Message");
      if (text.trim()) textOf(item).textContent = text;
      // What the files became (their ids and sniffed types), told by the server.
      showFiles(item, JSON.parse(answer.headers.get("X-Claybot-Files") || "[]"));
      field.value = "";
      chosen.value = "";
      field.focus();
    }
  });

  prompts.addEventListener("posted", (event) => {
    const item = event.target.closest(".prompt");
    const allowed = event.detail.submitter?.value === "allow";
    if (item) decided(item.dataset.request, allowed ? "Allowed." : "Denied.");
  });

  for (const form of document.querySelectorAll(".actions form")) {
    form.addEventListener("posted", () => {
      if (form.action.endsWith("/reset")) location.reload();
      else live.say("Stopped.");
    });
  }
})();
