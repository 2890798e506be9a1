// Client-side niceties for the contact form: a character counter and sending without a page
// reload. Every rule that matters is checked again by the server; nothing here is trusted.
(function () {
  "use strict";

  const form = document.getElementById("contact-form");
  if (!form) {
    return;
  }
  const message = form.elements.namedItem("message");
  const counter = document.getElementById("message-count");
  const status = document.getElementById("form-status");

  function showCount() {
    counter.textContent = message.value.length + " / 5000";
  }

  function show(text, kind) {
    status.textContent = text;
    status.className = kind;
  }

  function describe(httpStatus, body) {
    if (body && body.status === "sent") {
      return ["Thank you: your message has been sent.", "sent"];
    }
    if (body && body.status === "invalid" && body.errors) {
      const fields = Object.keys(body.errors).join(", ");
      return ["Please check these fields: " + fields + ".", "error"];
    }
    if (body && body.status === "not_sent") {
      return ["Your message could not be sent. Please try again later.", "error"];
    }
    if (httpStatus === 501) {
      return ["Sending messages is not available yet.", "error"];
    }
    return ["Something went wrong (HTTP " + httpStatus + ").", "error"];
  }

  async function submit(event) {
    event.preventDefault();
    const payload = {};
    for (const field of ["run_token", "name", "email", "phone", "message"]) {
      // Values are sent exactly as typed; the server decides what is valid.
      payload[field] = form.elements.namedItem(field).value;
    }
    show("Sending\u2026", "");
    let response;
    let body = null;
    try {
      response = await fetch(form.action, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(payload),
      });
    } catch (error) {
      show("The server could not be reached. Please try again later.", "error");
      return;
    }
    try {
      body = await response.json();
    } catch (error) {
      body = null;
    }
    const [text, kind] = describe(response.status, body);
    show(text, kind);
    if (kind === "sent") {
      form.querySelector("button[type=submit]").disabled = true;
    }
  }

  message.addEventListener("input", showCount);
  form.addEventListener("submit", submit);
  showCount();
})();
