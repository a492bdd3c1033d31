// The search page's results where no server renders them (the CDN's static copy of the
// page): the form's words are sent to /api/search, and the answer is written into the
// results section with the same markup the node's server writes (sidecar/search_page.py).
// Every text is set as text; a snippet's <mark> is the only element taken from the answer.
(() => {
  "use strict";
  const form = document.getElementById("search");
  const region = document.getElementById("results");
  const box = document.getElementById("q");
  const choice = document.getElementById("collections");
  if (!form || !region || !box || !choice || !window.fetch) {
    return;
  }
  const limit = region.dataset.limit;
  // The words of a scientific name written upright (exporter/contract/scientific_names.py).
  const upright = new Set((region.dataset.upright || "").split(" "));
  const titles = Object.create(null);
  for (const option of choice.options) {
    if (option.value) {
      titles[option.value] = option.text;
    }
  }

  const element = (tag, attributes, ...children) => {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      made.setAttribute(name, value);
    }
    made.append(...children);
    return made;
  };

  const pageOf = (q, collection) => {
    const query = new URLSearchParams({ q });
    if (collection) {
      query.set("collections", collection);
    }
    return `${form.getAttribute("action")}?${query}`;
  };

  // A record's page sits in a folder named by the first byte of the SHA-256 of its id
  // (exporter/contract/layout.py); without the digest (a page not served over HTTPS or
  // from this machine) the link is the record's JSON.
  const recordPage = async (item) => {
    if (!window.crypto || !crypto.subtle) {
      return item.url;
    }
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(item.id));
    const shard = new Uint8Array(digest)[0].toString(16).padStart(2, "0");
    return `/${item.collection}/${shard}/${item.id}.html`;
  };

  // A species' title as the pages write a scientific name: runs of words in <i>, its rank
  // words and the hybrid sign upright.
  const nameOf = (title) => {
    const parts = [];
    let run = [];
    let italic = null;
    const flush = () => {
      const text = run.join(" ");
      parts.push(italic ? element("i", {}, text) : text);
    };
    for (const word of title.split(/\s+/).filter(Boolean)) {
      const slanted = !upright.has(word.toLowerCase()) && !/^[([]/.test(word);
      if (italic !== null && slanted !== italic) {
        flush();
        parts.push(" ");
        run = [];
      }
      italic = slanted;
      run.push(word);
    }
    if (run.length) {
      flush();
    }
    return parts;
  };

  const decoded = (text) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&quot;/g, "\"").replace(/&#x27;/g, "'").replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");

  // The API's snippet is escaped text with the query's words in <mark>.
  const snippet = (html) => {
    const shown = element("p", { class: "snippet" });
    let marked = false;
    for (const part of html.split(/(<mark>|<\/mark>)/)) {
      if (part === "<mark>" || part === "</mark>") {
        marked = part === "<mark>";
      } else if (part) {
        shown.append(marked ? element("mark", {}, decoded(part)) : decoded(part));
      }
    }
    return shown;
  };

  // A reader's words as the page writes them (sidecar/search_page.py, `plain`): C0 and C1
  // controls but the tab and the line feed dropped, and each bidirectional control, which
  // would show the words in another order than they were typed, replaced with U+FFFD.
  const plain = (text) => text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "")
    .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "\ufffd");

  const heading = (text) => element("h2", { id: "results-title", tabindex: "-1" }, text);

  const counts = (answer, collection) => {
    const items = Object.entries(answer.counts).map(([name, count]) => {
      const title = titles[name] || name;
      const named = count && !collection
        ? element("a", { href: pageOf(answer.query, name) }, title) : title;
      return element("li", {}, named, ` ${count}`);
    });
    if (collection) {
      items.push(element("li", {}, element("a", { href: pageOf(answer.query, "") },
        "All collections")));
    }
    return element("nav", { class: "counts", "aria-label": "Results by collection" },
      element("ul", {}, ...items));
  };

  const found = async (answer, collection) => {
    const total = Object.values(answer.counts).reduce((sum, count) => sum + count, 0);
    const shown = answer.items.length;
    const where = collection ? ` in ${titles[collection] || collection}` : "";
    const parts = [heading(`Results for “${plain(answer.query)}”${where}`)];
    if (!total) {
      parts.push(element("p", { class: "summary" }, "No public record matches these words."));
    } else {
      parts.push(element("p", { class: "summary" }, `${total} ${total === 1 ? "record" :
        "records"} found${total > shown ? `; the best ${shown} are listed` : ""}.`));
    }
    parts.push(counts(answer, collection));
    if (shown) {
      const list = element("ol", { class: "found" });
      for (const item of answer.items) {
        const entry = element("li", {},
          element("h3", {}, element("a", { href: await recordPage(item) },
            ...(item.collection === "species" && item.title ? nameOf(item.title)
              : [item.title || item.id]))),
          element("p", { class: "where" }, titles[item.collection] || item.collection));
        if (item.source_node_name) {
          // on a hub: the member the record comes from
          entry.lastChild.append(" · from ",
            element("span", { class: "member" }, item.source_node_name));
        }
        if (item.snippet) {
          entry.append(snippet(item.snippet));
        }
        list.append(entry);
      }
      parts.push(list);
    }
    return parts;
  };

  const show = (parts, state) => {
    region.replaceChildren(...parts);
    region.dataset.state = state;
    region.querySelector("h2").focus();
  };

  const search = async (q, collection) => {
    const query = new URLSearchParams({ q, limit });
    if (collection) {
      query.set("collections", collection);
    }
    let answer;
    try {
      answer = await fetch(`/api/search?${query}`, { headers: { Accept: "application/json" } });
      const body = await answer.json();
      if (!answer.ok) {
        const message = (body.error && body.error.message) || `error ${answer.status}`;
        show([heading("Results"), element("p", { class: "error" }, plain(message))], "script");
        return;
      }
      show(await found(body, collection), "script");
    } catch (error) {
      show([heading("Results"), element("p", { class: "error" },
        "The node's search did not answer; try again in a moment.")], "script");
    }
  };

  const fromAddress = () => {
    const query = new URLSearchParams(location.search);
    const q = (query.get("q") || "").trim();
    const collection = query.get("collections") || "";
    if (q) {
      box.value = plain(q);
      choice.value = collection in titles ? collection : "";
      search(q, choice.value);
    }
  };

  form.addEventListener("submit", (event) => {
    const q = box.value.trim();
    if (!q) {
      return;
    }
    event.preventDefault();
    history.pushState(null, "", pageOf(q, choice.value));
    search(q, choice.value);
  });
  region.addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link || !link.closest(".counts")) {
      return;
    }
    event.preventDefault();
    history.pushState(null, "", link.getAttribute("href"));
    fromAddress();
  });
  window.addEventListener("popstate", fromAddress);
  if (region.dataset.state === "static") {
    // (what the page says for browsers without JavaScript is not for this one)
    region.querySelector(".summary").textContent = "Results appear here once you search.";
    fromAddress();
  }
})();
