// Run by tests/test_edge_function.py: `deno test --allow-net --allow-env --allow-read` with
// SIDECAR (a real sidecar on 127.0.0.1), KEY (granted the partners group), HIDDEN (the id of
// a partners-only resource), SITE (the exported site_out/) and PUBLIC (the id of a public
// species) in the environment. No network beyond 127.0.0.1.
import { forward } from "../edge-functions/keyed.ts";

const sidecar = Deno.env.get("SIDECAR")!;
const key = Deno.env.get("KEY")!;
const hidden = Deno.env.get("HIDDEN")!;
const site = Deno.env.get("SITE")!;
const open = Deno.env.get("PUBLIC")!;
const cdn = "https://cdn.example.org";

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

function response(answer: Response | URL): Response {
  if (answer instanceof URL) throw new Error(`a rewrite to ${answer}, not a response`);
  return answer;
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

function staticFile(): { next: () => Promise<Response>; called: () => boolean } {
  let called = false;
  return {
    next: () => {
      called = true;
      return Promise.resolve(new Response("from the CDN", { status: 404 }));
    },
    called: () => called,
  };
}

Deno.test("a keyed read of an open path reaches the sidecar and sees its restricted record", async () => {
  const headers: Record<string, string>[] = [{ "X-API-Key": key }, { "Authorization": `Bearer ${key}` }];
  for (const header of headers) {
    const cdnFile = staticFile();
    const answer = response(await forward(
      new Request(`${cdn}/api/resources/${hidden}`, { headers: header }), sidecar, cdnFile.next));
    check(!cdnFile.called(), "the static file answered a keyed request");
    check(answer.status === 200, `status ${answer.status}`);
    check((await answer.json()).id === hidden, "not the restricted record");
  }
});

Deno.test("the query string, the method and the body are forwarded", async () => {
  const page = response(await forward(
    new Request(`${cdn}/api/resources?limit=1`, { headers: { "X-API-Key": key } }), sidecar,
    staticFile().next));
  check((await page.json()).limit === 1, "the query string was lost");
  const asked = response(await forward(new Request(`${cdn}/api/library/ask`, {
    method: "POST", headers: { "X-API-Key": key, "Content-Type": "application/json" },
    body: JSON.stringify({ question: "When should knotweed stems be injected?" }),
  }), sidecar, staticFile().next));
  check(asked.status === 200, `ask: status ${asked.status}`);
  check("grounded" in (await asked.json()), "ask: not an answer");
});

Deno.test("a bad key is the sidecar's 401, not a public file", async () => {
  const answer = response(await forward(
    new Request(`${cdn}/api/species`, { headers: { "X-API-Key": "not.a.key" } }), sidecar,
    staticFile().next));
  check(answer.status === 401, `status ${answer.status}`);
  await answer.body?.cancel();
});

Deno.test("without a key the CDN answers, and the sidecar is not asked", async () => {
  const cdnFile = staticFile();
  const answer = response(await forward(new Request(`${cdn}/api/species?limit=3`),
    "http://127.0.0.1:9", cdnFile.next));
  check(cdnFile.called(), "the CDN was not asked");
  check(answer.status === 404, `status ${answer.status}`);
  await answer.body?.cancel();
});

Deno.test("an anonymous record read is rewritten to the record's file in its shard", async () => {
  for (const method of ["GET", "HEAD"]) {
    const cdnFile = staticFile();
    const file = await forward(new Request(`${cdn}/api/species/${open}?x=1`, { method }),
      "http://127.0.0.1:9", cdnFile.next);
    check(file instanceof URL, "not a rewrite");
    const url = file as URL;
    check(url.origin === cdn && url.pathname.endsWith(`/${open}.json`), `${url}`);
    check(await exists(site + url.pathname), `no file ${url.pathname} in site_out/`);
    check(!cdnFile.called(), "the rewrite went on to the next handler");
  }
  // A restricted record has no file: the rewrite lands on the CDN's 404, as for no record.
  const hiddenFile = await forward(new Request(`${cdn}/api/resources/${hidden}`),
    "http://127.0.0.1:9", staticFile().next);
  check(hiddenFile instanceof URL, "not a rewrite");
  check(!(await exists(site + (hiddenFile as URL).pathname)), "a restricted record's file");
  // Not a record: the other paths under /api/ go on as _redirects says.
  for (const path of ["/api/species", "/api/species/offset", "/api/keys/me"]) {
    const cdnFile = staticFile();
    response(await forward(new Request(`${cdn}${path}`), "http://127.0.0.1:9", cdnFile.next));
    check(cdnFile.called(), `${path}: the CDN was not asked`);
  }
});

Deno.test("without FEDNODE_SIDECAR_URL the public site is served and a key is told why not", async () => {
  const cdnFile = staticFile();
  await forward(new Request(`${cdn}/species/`), undefined, cdnFile.next);
  check(cdnFile.called(), "an anonymous page was not served from the CDN");
  const answer = response(await forward(
    new Request(`${cdn}/api/resources/${hidden}`, { headers: { "X-API-Key": key } }), undefined,
    staticFile().next));
  check(answer.status === 503, `status ${answer.status}`);
  const body = await answer.json();
  check(body.error.code === "unavailable" && body.error.message.includes("FEDNODE_SIDECAR_URL"),
        JSON.stringify(body));
});

Deno.test("a sidecar address with a path keeps it", async () => {
  const seen: string[] = [];
  const served = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    seen.push(new URL(request.url).pathname);
    return new Response("{}", { headers: { "Content-Type": "application/json" } });
  });
  try {
    const { port } = served.addr as Deno.NetAddr;
    await (response(await forward(
      new Request(`${cdn}/api/species?limit=1`, { headers: { "X-API-Key": key } }),
      `http://127.0.0.1:${port}/fednode/`, staticFile().next))).body?.cancel();
    check(seen[0] === "/fednode/api/species", `the sidecar was asked for ${seen[0]}`);
  } finally {
    await served.shutdown();
  }
});
