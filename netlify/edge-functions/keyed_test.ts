// Run by tests/test_edge_function.py: `deno test --allow-net --allow-env` with SIDECAR (a
// real sidecar on 127.0.0.1), KEY (granted the partners group) and HIDDEN (the id of a
// partners-only resource) in the environment. No network beyond 127.0.0.1.
import { forward } from "./keyed.ts";

const sidecar = Deno.env.get("SIDECAR")!;
const key = Deno.env.get("KEY")!;
const hidden = Deno.env.get("HIDDEN")!;
const cdn = "https://cdn.example.org";

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
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
    const answer = await forward(
      new Request(`${cdn}/api/resources/${hidden}`, { headers: header }), sidecar, cdnFile.next);
    check(!cdnFile.called(), "the static file answered a keyed request");
    check(answer.status === 200, `status ${answer.status}`);
    check((await answer.json()).id === hidden, "not the restricted record");
  }
});

Deno.test("the query string, the method and the body are forwarded", async () => {
  const page = await forward(
    new Request(`${cdn}/api/resources?limit=1`, { headers: { "X-API-Key": key } }), sidecar,
    staticFile().next);
  check((await page.json()).limit === 1, "the query string was lost");
  const asked = await forward(new Request(`${cdn}/api/library/ask`, {
    method: "POST", headers: { "X-API-Key": key, "Content-Type": "application/json" },
    body: JSON.stringify({ question: "When should knotweed stems be injected?" }),
  }), sidecar, staticFile().next);
  check(asked.status === 200, `ask: status ${asked.status}`);
  check("grounded" in (await asked.json()), "ask: not an answer");
});

Deno.test("a bad key is the sidecar's 401, not a public file", async () => {
  const answer = await forward(
    new Request(`${cdn}/api/species`, { headers: { "X-API-Key": "not.a.key" } }), sidecar,
    staticFile().next);
  check(answer.status === 401, `status ${answer.status}`);
  await answer.body?.cancel();
});

Deno.test("without a key the CDN answers, and the sidecar is not asked", async () => {
  const cdnFile = staticFile();
  const answer = await forward(new Request(`${cdn}/api/resources/${hidden}`), "http://127.0.0.1:9",
    cdnFile.next);
  check(cdnFile.called(), "the CDN was not asked");
  check(answer.status === 404, `status ${answer.status}`);
  await answer.body?.cancel();
});
