// The library page's form: the reader's question and key are sent to POST /api/library/ask
// on this site's own address (the node's server answers it there, or the CDN sends it on),
// and the answer and passages are written into the answer section, each passage linked to
// its page of the PDF. Every text is set as text. The key is sent with this one request and
// kept nowhere. Without JavaScript the form stays hidden and the page says how to ask.
(() => {
  "use strict";
  const form = document.getElementById("ask");
  const region = document.getElementById("answer");
  const box = document.getElementById("question");
  const key = document.getElementById("key");
  if (!form || !region || !box || !key || !window.fetch) {
    return;
  }
  const sidecar = form.dataset.sidecar;
  const limit = Number(form.dataset.limit);

  const element = (tag, attributes, ...children) => {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      made.setAttribute(name, value);
    }
    made.append(...children);
    return made;
  };

  const show = (parts, state, focus) => {
    region.replaceChildren(element("h2", { id: "answer-title", tabindex: "-1" }, "Answer"),
      ...parts);
    region.dataset.state = state;
    if (focus) {
      region.querySelector("h2").focus();
    }
  };

  const where = (item) => element("a", { href: item.url },
    `${item.title}, page ${item.page_label || item.page}`);

  const answered = (body) => {
    const parts = [];
    if (body.answer) {
      parts.push(element("p", { class: "answer" }, body.answer));
      parts.push(element("ul", { class: "citations" }, ...body.citations.map((c) =>
        element("li", {}, `[${c.n}] `, where(c)))));
    }
    if (body.message) {
      parts.push(element("p", { class: "summary" }, body.message));
    }
    if (body.passages.length) {
      parts.push(element("h3", {}, "Passages closest to your question"));
      parts.push(element("ol", { class: "passages" }, ...body.passages.map((p) =>
        element("li", {}, element("blockquote", {}, element("p", {}, p.quote)),
          element("p", { class: "where" }, where(p))))));
    }
    return parts;
  };

  // No server answered as the node's does: this is a copy of the site without one.
  const unanswered = () => {
    if (new URL(sidecar, location.href).origin === location.origin) {
      return [element("p", { class: "error" },
        "The node's server did not answer; try again in a moment.")];
    }
    return [element("p", { class: "error" }, "This copy of the site has no server to ask. ",
      "Ask at the node's server, ", element("a", { href: `${sidecar}/library/` },
        `${sidecar}/library/`), ".")];
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const question = box.value.trim();
    if (!question) {
      return;
    }
    show([element("p", { class: "summary" }, "Asking the library…")], "asking", false);
    let response;
    let body;
    try {
      response = await fetch("/api/library/ask", {
        method: "POST",
        headers: { Authorization: `Bearer ${key.value.trim()}`,
          "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ question, limit }),
      });
      body = await response.json();
    } catch (error) {
      show(unanswered(), "error", true);
      return;
    }
    if (!response.ok) {
      const message = (body.error && body.error.message) || `error ${response.status}`;
      show([element("p", { class: "error" }, message)], "error", true);
      return;
    }
    show(answered(body), "answered", true);
  });
  form.hidden = false;
  show([element("p", { class: "summary" }, "The answer appears here once you ask.")], "ready",
    false);
})();
