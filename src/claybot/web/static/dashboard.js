// Times in the viewer's own time zone: the server writes UTC into <time datetime>.
for (const element of document.querySelectorAll("time[datetime]")) {
  const moment = new Date(element.getAttribute("datetime"));
  if (!Number.isNaN(moment.getTime())) {
    element.textContent = moment.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
    element.title = element.getAttribute("datetime");
  }
}

// A form that deletes asks first.
for (const form of document.querySelectorAll("form[data-confirm]")) {
  form.addEventListener("submit", (event) => {
    if (!confirm(form.dataset.confirm)) event.preventDefault();
  });
}
